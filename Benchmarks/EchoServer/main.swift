import DBus
// Replaced with the benchmark server below.
