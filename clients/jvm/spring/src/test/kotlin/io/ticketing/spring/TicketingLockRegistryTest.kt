package io.ticketing.spring

import io.ticketing.client.TicketBroker
import io.ticketing.client.TicketLock
import io.ticketing.client.support.RealServer
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotSame
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import org.springframework.integration.support.locks.LockRegistry
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/** The Spring Integration adapter against the real server. */
@Timeout(60)
class TicketingLockRegistryTest {
    private lateinit var server: RealServer
    private lateinit var broker: TicketBroker

    @BeforeEach
    fun start() {
        RealServer.assumeAvailable()
        server = RealServer.start()
        broker = TicketBroker.connect(server.address)
        broker.waitReadyBlocking(Duration.ofSeconds(10))
    }

    @AfterEach
    fun stop() {
        broker.close()
        server.close()
    }

    @Test
    fun `obtain gives one Lock per key, and holds are fenced grants with their token`() {
        val registry: LockRegistry = TicketingLockRegistry(broker, Duration.ofSeconds(30), keyPrefix = "app/", keepAlive = false)
        val lock = registry.obtain("invoice-42")
        assertSame(lock, registry.obtain("invoice-42"))
        assertNotSame(lock, registry.obtain("invoice-43"))
        assertTrue(lock.tryLock(1, TimeUnit.SECONDS))
        val token = (registry as TicketingLockRegistry).token("invoice-42")
        assertEquals(token, (lock as TicketLock).ticket()!!.token)
        assertEquals("app/invoice-42", lock.key)
        assertFalse(CompletableFuture.supplyAsync { lock.tryLock() }.get(10, TimeUnit.SECONDS), "another thread waits")
        lock.unlock()
        // Spring's own helper, on top of obtain(): runs the task under the lock.
        val inside: Long = registry.executeLocked(
            "invoice-42",
            Duration.ofSeconds(2),
            org.springframework.integration.util.CheckedCallable<Long, RuntimeException> { registry.token("invoice-42") },
        )
        assertTrue(java.lang.Long.compareUnsigned(inside, token) > 0, "the next grant has a higher token")
        assertThrows<IllegalMonitorStateException> { registry.token("invoice-42") }
    }

    @Test
    fun `unused locks expire, held ones stay`() {
        val registry = TicketingLockRegistry(broker, Duration.ofSeconds(30), keepAlive = false)
        val held = registry.obtain("held")
        registry.obtain("idle")
        assertTrue(held.tryLock())
        Thread.sleep(20)
        registry.expireUnusedOlderThan(10)
        assertSame(held, registry.obtain("held"))
        held.unlock()
        assertThrows<IllegalStateException> { registry.renewLock("idle") }
    }
}
