@testable import BatonSync
import Testing

@Suite struct ServerAddressTests {
    @Test func aSyncURLReadsAsLibpqReadsIt() throws {
        let plain = try ServerAddress("postgres://baton_ab12:p%40ss@db.example.org:6543/sync?sslmode=disable")
        #expect(plain.host == "db.example.org" && plain.port == 6543 && plain.role == "baton_ab12" && plain.password == "p@ss")
        #expect(plain.database == "sync" && plain.tls == .disable)
        let defaults = try ServerAddress("postgresql://dev@localhost")
        #expect(defaults.port == 5432 && defaults.database == "dev" && defaults.tls == .prefer && defaults.password.isEmpty)
        #expect(try ServerAddress("postgres://d@h/s?sslmode=verify-full&sslrootcert=/etc/ca.pem").tls == .verifyFull(rootCertificates: "/etc/ca.pem"))
        #expect(throws: SyncError.self) { try ServerAddress("https://h/s") }
        #expect(throws: SyncError.self) { try ServerAddress("postgres://h/s") }
        #expect(throws: SyncError.server("sslmode=sometimes is not one of disable, prefer, require, verify-full")) {
            try ServerAddress("postgres://d@h/s?sslmode=sometimes")
        }
    }
}
