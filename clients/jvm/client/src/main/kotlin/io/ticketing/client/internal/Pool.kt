package io.ticketing.client.internal

import io.ticketing.client.ConnectionEvent
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

    /** System.nanoTime() when this slot last reconnected at once after a drop (at most once per reconnect cycle). */
    private var quickRetryAt: Long? = null

    /**
     * System.nanoTime() since when redirect targets of this slot have been unreachable (null: the last
     * connection was usable, or no target failed). Failing over, a standby may name the dead active for
     * a few hundred ms more: the slot goes back to its configured address every retry interval for up
     * to the reconnect interval, rather than using up its redirects in a few ms and waiting out the cycle.
     */
    private var bouncingSince: Long? = null

    @Volatile var current: Connection? = null
        private set

    /** Why the last connection of this slot failed (for [io.ticketing.client.BrokerState]). */
    @Volatile var lastError: Throwable? = null
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

    fun onReady(c: Connection, nodeName: String) {
        lock.withLock {
            if (current !== c) return
            redirectsInARow = 0
            bouncingSince = null
        }
        pool.emit(ConnectionEvent.Connected(c.address.toString(), configured.toString(), nodeName))
        pool.onReady()
    }

    /** [c] is dying of silence: its server's other connections are checked at once. */
    fun wentSilent(c: Connection) = pool.wentSilent(c)

    /** A suspect connection received data: usable again, like a new one. */
    fun onHeardFrom() = pool.onReady()

    /**
     * [c] is gone. [afterOwnHalfClose]: the server closed cleanly after our own
     * FIN (an aborted acquire), so nothing is wrong with it: reconnect at once
     * instead of after the reconnect delay, or a few cancelled acquires in a
     * row would leave no usable connection for seconds.
     */
    fun onClosed(c: Connection, wasReady: Boolean, redirect: Reply.Redirect?, cause: Throwable, afterOwnHalfClose: Boolean = false) {
        if (!afterOwnHalfClose) {
            pool.recordFailure(cause)
            lastError = cause
        }
        if (redirect != null) pool.emit(ConnectionEvent.Redirected(c.address.toString(), redirect.address, configured.toString()))
        if (wasReady) {
            val quiet = redirect != null || afterOwnHalfClose || pool.isClosed
            pool.emit(ConnectionEvent.Disconnected(c.address.toString(), configured.toString(), if (quiet) null else cause))
        }
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
            // A redirect target that cannot be reached (the active it named has just died): back to the
            // configured address, whose node may be taking over, every retry interval for at most the
            // reconnect interval (then the cycle).
            if (redirect == null && !wasReady && !afterOwnHalfClose && redirectsInARow > 0 && c.address != configured) {
                val now = System.nanoTime()
                val since = bouncingSince ?: now.also { bouncingSince = it }
                if (now - since < Connection.millis(pool.env.timings.reconnectMillis)) {
                    redirectsInARow = 0
                    pool.env.schedule(pool.env.timings.releaseRetryMillis) { if (current === c) open(configured) }
                    return
                }
            }
            redirectsInARow = 0
            bouncingSince = null
        }
        var delay = if (afterOwnHalfClose) 0L else Jitter.around(pool.env.timings.reconnectMillis)
        // A usable connection that dropped is retried at once too (its cluster may have failed over), once per
        // cycle. Not after `M -`: that node said no active is known yet, so the normal cycle applies.
        if (delay > 0 && wasReady && redirect == null) {
            val now = System.nanoTime()
            lock.withLock {
                val last = quickRetryAt
                if (last == null || now - last >= TimeUnit.MILLISECONDS.toNanos(pool.env.timings.reconnectMillis)) {
                    quickRetryAt = now
                    delay = 0
                }
            }
        }
        pool.env.schedule(delay) { if (current === c) open(configured) }
    }
}

/**
 * The connections of one broker: two to a single address, one per address
 * otherwise; round-robin over the usable ones.
 */
internal class Pool(val env: Env, addresses: List<HostPort>, private val events: ((ConnectionEvent) -> Unit)? = null) {
    val slots: List<Slot> =
        if (addresses.size == 1) listOf(Slot(this, addresses[0]), Slot(this, addresses[0])) else addresses.map { Slot(this, it) }

    private val next = AtomicInteger()
    /** [failFast]: a caller's waitReady, which fails at once when a server refuses our client token. */
    private class Waiter(val accepts: (Connection) -> Boolean, val future: CompletableFuture<Unit>, val failFast: Boolean)

    private val readyWaiters = ConcurrentLinkedQueue<Waiter>()

    @Volatile var isClosed = false
        private set

    @Volatile private var lastFailure: Throwable? = null

    fun start() = slots.forEach { it.open(it.configured) }

    /** Hands [event] to the listener, if any (in order, off the I/O threads: see BrokerCore). */
    fun emit(event: ConnectionEvent) {
        events?.invoke(event)
    }

    /**
     * The usable connections, in round-robin order from the next one. Not a suspect one (its server
     * went silent on another connection): it answers its ping within a round trip if the server is
     * alive, and is dead within the busy pong deadline if not.
     */
    fun usable(): List<Connection> {
        val n = slots.size
        val first = Math.floorMod(next.getAndIncrement(), n)
        val out = ArrayList<Connection>(n)
        for (i in 0 until n) {
            val c = slots[(first + i) % n].current
            if (c != null && c.isReady && !c.isSuspect && out.none { it === c }) out.add(c)
        }
        return out
    }

    fun anyReady(accepts: (Connection) -> Boolean = { true }): Boolean =
        slots.any { s -> s.current?.let { it.isReady && !it.isSuspect && accepts(it) } == true }

    /**
     * A server silent on one connection (SIGSTOP, a frozen VM) is silent on all: [silent] died of it,
     * so the others to its address are pinged at once rather than each on its own ping cycle (an
     * idle one would take 5 s + 5 s), and get no request until they answer.
     */
    fun wentSilent(silent: Connection) {
        for (s in slots) {
            val c = s.current
            if (c == null || c === silent || c.address != silent.address) continue
            // One that was only redirected to it goes back to its own address at once: that node may be
            // the one taking over.
            if (s.configured == c.address || !c.leaveForSilentSibling()) c.siblingWentSilent()
        }
    }

    fun onReady() {
        for (w in readyWaiters) if (anyReady(w.accepts)) w.future.complete(Unit)
    }

    fun recordFailure(cause: Throwable) {
        lastFailure = cause
        // A refused token will not be accepted on the next try either: a caller
        // waiting for a usable connection learns it now, not at its timeout.
        if (cause is TicketingException.Auth && !anyReady()) {
            for (w in readyWaiters) if (w.failFast) w.future.completeExceptionally(TicketingException.Auth(cause.message ?: "client token refused"))
        }
    }

    /** Fails every caller waiting for a usable connection (close). */
    fun failReadyWaiters(e: TicketingException) {
        for (w in readyWaiters) w.future.completeExceptionally(e)
    }

    /** True while a connection is half-closed and waiting for the server to close it. */
    fun anyDraining(): Boolean = slots.any { it.current?.currentState == Connection.State.DRAINING }

    /**
     * Completes when a connection that [accepts] is usable (at once if one is);
     * fails with NoConnection after [timeoutNanos].
     */
    fun awaitReady(timeoutNanos: Long, accepts: (Connection) -> Boolean = { true }, failFast: Boolean = false): CompletableFuture<Unit> {
        val f = CompletableFuture<Unit>()
        if (isClosed) return f.apply { completeExceptionally(TicketingException.Closed()) }
        if (anyReady(accepts)) return f.apply { complete(Unit) }
        val last = lastFailure
        if (failFast && last is TicketingException.Auth) {
            return f.apply { completeExceptionally(TicketingException.Auth(last.message ?: "client token refused")) }
        }
        val waiter = Waiter(accepts, f, failFast)
        readyWaiters.add(waiter)
        // Checked again once the waiter is queued: a close() or a ready connection between the checks
        // above and the add would otherwise never reach it (it waited out its whole timeout).
        if (isClosed) f.completeExceptionally(TicketingException.Closed())
        else if (anyReady(accepts)) f.complete(Unit)
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
}
