package io.ticketing.client.support

import java.io.File
import java.nio.file.Files
import java.nio.file.Path
import java.security.KeyStore
import java.util.concurrent.TimeUnit
import javax.net.ssl.KeyManagerFactory
import javax.net.ssl.SSLContext
import javax.net.ssl.SSLServerSocketFactory

/**
 * A throw-away CA and server certificates, made with the openssl CLI in a
 * temporary directory for each test run (no key is ever committed).
 */
class TestCerts private constructor(val dir: Path) : AutoCloseable {
    val caCert: Path = dir.resolve("ca.crt")

    /** For 127.0.0.1 and localhost. */
    val serverCert: Path = dir.resolve("server.crt")
    val serverKey: Path = dir.resolve("server.key")

    /** Signed by the same CA, but for another host name only. */
    val otherHostCert: Path = dir.resolve("other.crt")
    val otherHostKey: Path = dir.resolve("other.key")

    fun serverFactory(cert: Path = serverCert, key: Path = serverKey): SSLServerSocketFactory {
        val p12 = dir.resolve("${cert.fileName}.p12")
        if (!Files.exists(p12)) {
            run("openssl", "pkcs12", "-export", "-in", cert.toString(), "-inkey", key.toString(), "-out", p12.toString(), "-passout", "pass:changeit")
        }
        val store = KeyStore.getInstance("PKCS12")
        Files.newInputStream(p12).use { store.load(it, "changeit".toCharArray()) }
        val kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm())
        kmf.init(store, "changeit".toCharArray())
        return SSLContext.getInstance("TLS").apply { init(kmf.keyManagers, null, null) }.serverSocketFactory
    }

    override fun close() {
        dir.toFile().deleteRecursively()
    }

    companion object {
        fun create(): TestCerts {
            val dir = Files.createTempDirectory("ticketing-certs-")
            val c = TestCerts(dir)
            fun p(name: String) = dir.resolve(name).toString()
            run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p("ca.key"), "-out", p("ca.crt"),
                "-days", "2", "-subj", "/CN=Ticketing Test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
            for ((name, san) in listOf("server" to "IP:127.0.0.1,DNS:localhost", "other" to "DNS:other.example")) {
                Files.writeString(dir.resolve("$name.ext"), "subjectAltName=$san\nextendedKeyUsage=serverAuth\n")
                run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", p("$name.key"), "-out", p("$name.csr"), "-subj", "/CN=$name")
                run("openssl", "x509", "-req", "-in", p("$name.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"), "-CAcreateserial",
                    "-out", p("$name.crt"), "-days", "2", "-extfile", p("$name.ext"))
            }
            return c
        }

        private fun run(vararg cmd: String) {
            val log = File.createTempFile("openssl", ".log")
            val p = ProcessBuilder(*cmd).redirectErrorStream(true).redirectOutput(log).start()
            if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw AssertionError("${cmd.joinToString(" ")} failed: ${log.readText()}")
            }
            log.delete()
        }
    }
}
