package io.ticketing.client

import io.ticketing.client.seed.JavaSeedExamples
import io.ticketing.client.seed.OrderController
import io.ticketing.client.seed.executorExample
import io.ticketing.client.seed.kotlinCoroutinesExample
import io.ticketing.client.support.RealServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import java.time.Duration
import java.util.concurrent.Executors

/**
 * Runs the documentation's examples as written, against the real server on
 * the address they name (127.0.0.1:5225).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(60)
class SeedExamplesTest {
    private lateinit var server: RealServer

    @BeforeAll
    fun startServer() {
        RealServer.assumeAvailable()
        // The examples name 127.0.0.1:5225; on a shared machine someone else may be using it.
        val free = runCatching {
            java.net.ServerSocket(5225, 1, java.net.InetAddress.getByName("127.0.0.1")).close()
        }.isSuccess
        if (!free && System.getProperty("ticketing.requireServer") != "true") {
            org.junit.jupiter.api.Assumptions.abort<Unit>("127.0.0.1:5225 is in use: cannot run the documentation's examples as written")
        }
        server = RealServer.start(port = 5225)
    }

    @AfterAll
    fun stopServer() {
        if (::server.isInitialized) server.close()
    }

    private fun assertKeyFree(key: String) {
        TicketBroker.connect(server.address).use { b ->
            b.waitReadyBlocking(Duration.ofSeconds(5))
            b.acquireBlocking(key, Duration.ZERO, Duration.ofSeconds(1)).releaseBlocking()
        }
    }

    @Test
    fun `Kotlin coroutines example runs and releases`() {
        val token = runBlocking { kotlinCoroutinesExample() }
        assertTrue(token > 0)
        assertKeyFree("key")
    }

    @Test
    fun `Java blocking example runs and try-with-resources releases`() {
        val token = JavaSeedExamples.javaBlockingExample()
        assertTrue(token > 0)
        // close() released in the background; the broker's close() waited for it.
        assertKeyFree("key")
    }

    @Test
    fun `Java async example acquires and releases`() {
        TicketBroker.connect(server.address).use { broker ->
            broker.waitReadyBlocking(Duration.ofSeconds(5))
            assertEquals(ReleaseResult.RELEASED, JavaSeedExamples.javaAsyncExample(broker))
        }
    }

    @Test
    fun `Spring controller example works on virtual threads or plain threads`() {
        TicketBroker.connect(server.address).use { broker ->
            broker.waitReadyBlocking(Duration.ofSeconds(5))
            val controller = OrderController(broker)
            val pool = Executors.newFixedThreadPool(4)
            try {
                val results = (1..8).map { i -> pool.submit<String> { controller.place("${i % 3}") } }.map { it.get() }
                assertEquals(List(8) { "ok" }, results)
            } finally {
                pool.shutdownNow()
            }
        }
    }

    @Test
    fun `executor example uses the given executor`() {
        val executor = Executors.newSingleThreadExecutor()
        try {
            executorExample(executor).use { b -> b.waitReadyBlocking(Duration.ofSeconds(5)) }
        } finally {
            executor.shutdownNow()
        }
    }

    @Test
    fun `Java TLS factories give the Kotlin modes`() {
        assertEquals(
            listOf(TlsMode.SystemRoots, TlsMode.Ca("ca.crt"), TlsMode.InsecureSkipVerify, TlsMode.Off),
            JavaSeedExamples.javaTlsFactories(),
        )
    }
}
