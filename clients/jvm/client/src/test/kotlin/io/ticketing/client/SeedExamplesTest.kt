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
 * Runs the documentation's examples as written, against the real server on a
 * free port (the examples take the address the documentation spells
 * 127.0.0.1:5225 as a parameter: a test never binds the default port, which a
 * developer's own server may be using).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(60)
class SeedExamplesTest {
    private lateinit var server: RealServer

    @BeforeAll
    fun startServer() {
        server = RealServer.start()
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
        val token = runBlocking { kotlinCoroutinesExample(server.address) }
        assertTrue(token > 0)
        assertKeyFree("key")
    }

    @Test
    fun `Java blocking example runs and try-with-resources releases`() {
        val token = JavaSeedExamples.javaBlockingExample(server.address)
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
            executorExample(executor, server.address).use { b -> b.waitReadyBlocking(Duration.ofSeconds(5)) }
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
