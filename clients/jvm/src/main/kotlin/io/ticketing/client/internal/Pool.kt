package io.ticketing.client.internal

import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Reply
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * One place a connection lives: its configured address, the connection now
 * open for it (perhaps to a redirect target), and the reconnect cycle.
 */
internal class Slot(private val pool: Pool, val configured: HostPort) {
    private val lock = ReentrantLock()
    private var redirectsInARow = 0

    @Volatile var current: Connection? = null
        private set

    fun open(address: HostPort) {
        val c = Connection(pool.env, this, address)
        lock.withLock {
            if (pool.isClosed) return
            current = c
        }
        c.start()
    }

    /** Closes the current connection; [open] after this does nothing. */
    fun shutdown(cause: Throwable) {
        val c = lock.withLock { current }
        c?.close(cause)
    }

    fun onReady(c: Connection) {
        lock.withLock {
            if (current !== c) return
            redirectsInARow = 0
        }
        pool.onReady()
    }

    fun onClosed(c: Connection, wasReady: Boolean, redirect: Reply.Redirect?, cause: Throwable) {
        pool.recordFailure(cause)
        lock.withLock {
            if (current !== c || pool.isClosed) return
            val target = redirect?.address
            if (target != null && redirectsInARow < pool.env.timings.maxRedirects) {
                redirectsInARow++
                val address = try {
                    HostPort.parse(target)
                } catch (_: TicketingException) {
                    null
                }
                if (address != null) {
                    pool.env.debug { "following redirect from ${c.address} to $address" }
                    pool.env.schedule(0) { if (current === c) open(address) }
                    return
                }
            }
            redirectsInARow = 0
        }
        pool.env.schedule(pool.env.timings.reconnectMillis) { if (current === c) open(configured) }
    }
}

/**
 * The connections of one broker: two to a single address, one per address
 * otherwise; round-robin over the usable ones.
 */
internal class Pool(val env: Env, addresses: List<HostPort>) {
    val slots: List<Slot> =
        if (addresses.size == 1) listOf(Slot(this, addresses[0]), Slot(this, addresses[0])) else addresses.map { Slot(this, it) }

    private val next = AtomicInteger()
    private val readyWaiters = ConcurrentLinkedQueue<CompletableFuture<Unit>>()

    @Volatile var isClosed = false
        private set

    @Volatile private var lastFailure: Throwable? = null

    fun start() = slots.forEach { it.open(it.configured) }

    /** The usable connections, in round-robin order from the next one. */
    fun usable(): List<Connection> {
        val n = slots.size
        val first = Math.floorMod(next.getAndIncrement(), n)
        val out = ArrayList<Connection>(n)
        for (i in 0 until n) {
            val c = slots[(first + i) % n].current
            if (c != null && c.isReady && out.none { it === c }) out.add(c)
        }
        return out
    }

    fun anyReady(): Boolean = slots.any { it.current?.isReady == true }

    fun onReady() {
        while (true) readyWaiters.poll()?.complete(Unit) ?: break
    }

    fun recordFailure(cause: Throwable) {
        lastFailure = cause
    }

    /** Completes when a connection is usable (at once if one is); fails after [timeoutNanos]. */
    fun awaitReady(timeoutNanos: Long): CompletableFuture<Unit> {
        val f = CompletableFuture<Unit>()
        if (isClosed) return f.apply { completeExceptionally(TicketingException.Closed()) }
        if (anyReady()) return f.apply { complete(Unit) }
        readyWaiters.add(f)
        if (anyReady()) f.complete(Unit)
        val timer = env.scheduler.schedule(
            { f.completeExceptionally(noConnection("no connection usable within ${TimeUnit.NANOSECONDS.toMillis(timeoutNanos)} ms")) },
            maxOf(0L, timeoutNanos),
            TimeUnit.NANOSECONDS,
        )
        f.whenComplete { _, _ ->
            timer.cancel(false)
            readyWaiters.remove(f)
        }
        return f
    }

    /** NoConnection with the last connection failure as cause; Auth if the server refused our token. */
    fun noConnection(message: String): TicketingException {
        val last = lastFailure
        if (last is TicketingException.Auth) return TicketingException.Auth(last.message ?: "client token refused")
        return TicketingException.NoConnection(message + (last?.let { " (last failure: $it)" } ?: ""), last)
    }

    fun close() {
        isClosed = true
        val closed = TicketingException.Closed()
        while (true) readyWaiters.poll()?.completeExceptionally(closed) ?: break
        for (s in slots) s.shutdown(closed)
    }

    fun tick() {
        val now = System.nanoTime()
        for (s in slots) s.current?.tick(now)
    }
}
