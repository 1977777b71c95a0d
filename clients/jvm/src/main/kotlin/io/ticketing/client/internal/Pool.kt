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
    private class Waiter(val accepts: (Connection) -> Boolean, val future: CompletableFuture<Unit>)

    private val readyWaiters = ConcurrentLinkedQueue<Waiter>()

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

    fun anyReady(accepts: (Connection) -> Boolean = { true }): Boolean =
        slots.any { s -> s.current?.let { it.isReady && accepts(it) } == true }

    fun onReady() {
        for (w in readyWaiters) if (anyReady(w.accepts)) w.future.complete(Unit)
    }

    fun recordFailure(cause: Throwable) {
        lastFailure = cause
    }

    /**
     * Completes when a connection that [accepts] is usable (at once if one is);
     * fails with NoConnection after [timeoutNanos].
     */
    fun awaitReady(timeoutNanos: Long, accepts: (Connection) -> Boolean = { true }): CompletableFuture<Unit> {
        val f = CompletableFuture<Unit>()
        if (isClosed) return f.apply { completeExceptionally(TicketingException.Closed()) }
        if (anyReady(accepts)) return f.apply { complete(Unit) }
        val waiter = Waiter(accepts, f)
        readyWaiters.add(waiter)
        if (anyReady(accepts)) f.complete(Unit)
        val timer = try {
            env.scheduler.schedule(
                { f.completeExceptionally(noConnection("no connection usable within ${TimeUnit.NANOSECONDS.toMillis(timeoutNanos)} ms")) },
                maxOf(0L, timeoutNanos),
                TimeUnit.NANOSECONDS,
            )
        } catch (_: java.util.concurrent.RejectedExecutionException) {
            f.completeExceptionally(TicketingException.Closed())
            null
        }
        f.whenComplete { _, _ ->
            timer?.cancel(false)
            readyWaiters.remove(waiter)
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
        while (true) readyWaiters.poll()?.future?.completeExceptionally(closed) ?: break
        for (s in slots) s.shutdown(closed)
    }

    fun tick() {
        val now = System.nanoTime()
        for (s in slots) s.current?.tick(now)
    }
}
