#ifndef BATON_CDBUS_SHIM_H
#define BATON_CDBUS_SHIM_H

#include <dbus/dbus.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The Swift importer drops libdbus's `((int) 's')` macros; these give the
 * type codes a name Swift can see. */
static inline int cdbus_type_invalid(void) { return DBUS_TYPE_INVALID; }

/* dbus_message_iter_get_basic writes into a union whose width depends on the
 * type; these typed readers keep Swift away from type punning. */
static inline unsigned char cdbus_iter_get_byte(DBusMessageIter *it) { unsigned char v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_bool_t cdbus_iter_get_bool(DBusMessageIter *it) { dbus_bool_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_int16_t cdbus_iter_get_int16(DBusMessageIter *it) { dbus_int16_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_uint16_t cdbus_iter_get_uint16(DBusMessageIter *it) { dbus_uint16_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_int32_t cdbus_iter_get_int32(DBusMessageIter *it) { dbus_int32_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_uint32_t cdbus_iter_get_uint32(DBusMessageIter *it) { dbus_uint32_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_int64_t cdbus_iter_get_int64(DBusMessageIter *it) { dbus_int64_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline dbus_uint64_t cdbus_iter_get_uint64(DBusMessageIter *it) { dbus_uint64_t v = 0; dbus_message_iter_get_basic(it, &v); return v; }
static inline double cdbus_iter_get_double(DBusMessageIter *it) { double v = 0; dbus_message_iter_get_basic(it, &v); return v; }
/* A Unix file descriptor: libdbus returns a duplicate the caller owns, or -1. */
static inline int cdbus_iter_get_unix_fd(DBusMessageIter *it) { int v = -1; dbus_message_iter_get_basic(it, &v); return v; }
static inline const char *cdbus_iter_get_string(DBusMessageIter *it) { const char *v = 0; dbus_message_iter_get_basic(it, &v); return v; }

/* Appending a string-like basic value takes a pointer to the pointer. */
static inline dbus_bool_t cdbus_iter_append_string(DBusMessageIter *it, int type, const char *value) {
    return dbus_message_iter_append_basic(it, type, &value);
}

/* pidfd_open(2), and whether the process a pidfd pins still runs (pidfd_send_signal(2) with
 * signal 0): through syscall(2), which Swift cannot call (it is variadic). */
static inline int cdbus_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
static inline int cdbus_pidfd_is_alive(int pidfd) { return syscall(SYS_pidfd_send_signal, pidfd, 0, (void *)0, 0) == 0; }

#endif
