package io.ticketing.client

import io.ticketing.client.support.FakeServer
import io.ticketing.client.support.RealServer
import io.ticketing.client.support.TestCerts
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.millis
import io.ticketing.client.support.secs
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.TimeUnit
import java.util.logging.Handler
import java.util.logging.LogRecord
import java.util.logging.Logger
import javax.net.ssl.SSLException

/** The four TLS modes, against a TLS test server (certificates made with openssl) and the real server. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(30)
class TlsTest {
    private lateinit var certs: TestCerts

    @BeforeAll
    fun makeCerts() {
        certs = TestCerts.create()
    }

    @AfterAll
    fun removeCerts() {
        certs.close()
    }

    /** A broker on a TLS fake server with [mode]; answers hello on both connections and one acquire. */
    private fun acquireOnce(mode: TlsMode, addr: (FakeServer) -> String = { it.address }) {
        FakeServer(certs.serverFactory()).use { server ->
            fastBroker(addr(server)) { tls(mode) }.use { b ->
                val c1 = server.acceptHello()
                val c2 = server.acceptHello()
                b.waitReadyBlocking(secs(5))
                val f = b.acquireAsync("tls", Duration.ZERO, secs(30))
                // Round-robin picks either connection: both listen, the one that gets it answers.
                val got = java.util.concurrent.LinkedBlockingQueue<String>()
                for (c in listOf(c1, c2)) {
                    Thread {
                        val line = runCatching { c.readLine(3_000) }.getOrNull()
                        if (line != null) {
                            got.add(line)
                            c.send("A 1 tls")
                        }
                    }.apply { isDaemon = true }.start()
                }
                assertEquals("A tls 0 30", got.poll(5, TimeUnit.SECONDS))
                assertEquals(1L, f.get(5, TimeUnit.SECONDS).token)
            }
        }
    }

    private fun assertNoConnection(
        mode: TlsMode,
        cert: java.nio.file.Path = certs.serverCert,
        key: java.nio.file.Path = certs.serverKey,
        host: String = "127.0.0.1",
        waitMillis: Long = 1_500,
    ) {
        FakeServer(certs.serverFactory(cert, key)).use { server ->
            fastBroker("$host:${server.port}") { tls(mode) }.use { b ->
                // Drive the server side of both handshakes, so that they fail at once.
                repeat(2) {
                    val c = server.accept()
                    Thread { runCatching { c.readLine(3_000) } }.apply { isDaemon = true }.start()
                }
                val e = assertThrows<TicketingException.NoConnection> { b.waitReadyBlocking(millis(waitMillis)) }
                assertEquals("NO_CONNECTION", e.code)
                assertTrue(e.cause is SSLException || e.cause is java.io.IOException, "cause ${e.cause}")
            }
        }
    }

    @Test
    fun `Ca with a file path verifies the server`() = acquireOnce(TlsMode.Ca(certs.caCert.toString()))

    @Test
    fun `Ca with PEM text verifies the server (Java factory)`() = acquireOnce(TlsMode.ca(Files.readString(certs.caCert)))

    @Test
    fun `Ca checks the host name too - localhost is in the certificate`() = acquireOnce(TlsMode.Ca(certs.caCert)) { "localhost:${it.port}" }

    @Test
    fun `Ca rejects a certificate for another host`() =
        assertNoConnection(TlsMode.Ca(certs.caCert), certs.otherHostCert, certs.otherHostKey)

    @Test
    fun `SystemRoots rejects a server whose CA is not a system root`() = assertNoConnection(TlsMode.SystemRoots)

    @Test
    fun `Off against a TLS server never becomes usable`() =
        // "H 1\n" is less than a TLS record header: the server waits for more, the client's hello timeout (3 s here) ends it.
        assertNoConnection(TlsMode.Off, waitMillis = 4_500)

    @Test
    fun `InsecureSkipVerify connects to anything and logs a warning`() {
        val records = CopyOnWriteArrayList<LogRecord>()
        val handler = object : Handler() {
            override fun publish(record: LogRecord) { records.add(record) }
            override fun flush() = Unit
            override fun close() = Unit
        }
        val logger = Logger.getLogger("io.ticketing.client")
        logger.addHandler(handler)
        try {
            acquireOnce(TlsMode.InsecureSkipVerify)
            assertTrue(records.any { it.level == java.util.logging.Level.WARNING && it.message.contains("verification is DISABLED") })
        } finally {
            logger.removeHandler(handler)
        }
    }

    @Test
    fun `a missing CA file is an invalid argument at connect`() {
        val e = assertThrows<TicketingException.InvalidArgument> {
            TicketBroker.builder().addrs("127.0.0.1:1").tls(TlsMode.ca("/nonexistent/ca.crt")).connect()
        }
        assertEquals("INVALID_ARGUMENT", e.code)
    }

    @Test
    fun `abort after the write half-closes a TLS connection too`() {
        FakeServer(certs.serverFactory()).use { server ->
            fastBroker(server.address) { tls(TlsMode.Ca(certs.caCert)) }.use { b ->
                val c1 = server.acceptHello()
                val c2 = server.accept()
                b.waitReadyBlocking(secs(5))
                val f = b.acquireAsync("tls-abort", secs(10), secs(30))
                c1.expect("A tls-abort 10 30")
                c2.expect("H 1")
                c2.send("H 1 fake")
                Thread.sleep(100)
                f.cancel(false)
                c1.expectEof() // close_notify: the server sees the end of the stream
                c1.send("A 31 tls-abort")
                c2.expect("R tls-abort 31")
                c2.send("R tls-abort")
            }
        }
    }

    @Test
    fun `the real server over TLS with Ca`() {
        RealServer.start("--tls-cert", certs.serverCert.toString(), "--tls-key", certs.serverKey.toString()).use { server ->
            fastBroker(server.address) { tls(TlsMode.Ca(certs.caCert)) }.use { b ->
                b.waitReadyBlocking(secs(5))
                val t = b.acquireBlocking("real-tls", Duration.ZERO, secs(30))
                assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
            }
            fastBroker(server.address) { tls(TlsMode.InsecureSkipVerify) }.use { b ->
                b.waitReadyBlocking(secs(5))
                b.acquireBlocking("real-tls", Duration.ZERO, secs(30)).releaseBlocking()
            }
        }
    }
}
