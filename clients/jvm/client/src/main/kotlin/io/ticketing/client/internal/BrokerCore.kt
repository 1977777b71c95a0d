package io.ticketing.client.internal

import io.ticketing.client.ReleaseResult
import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Keys
import io.ticketing.client.wire.Wire
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.Executor
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import java.util.concurrent.SynchronousQueue
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.ThreadPoolExecutor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import java.util.function.Consumer

/** Everything a broker is built from. */
internal class BrokerConfig(
    val addresses: List<HostPort>,
    val clientToken: String?,
    val tls: io.ticketing.client.TlsMode,
    val executor: Executor?,
    val onError: Consumer<TicketingException>?,
    val timings: Timings,
    val beforeWrite: (() -> Unit)? = null,
    val onConnectionEvent: Consumer<io.ticketing.client.ConnectionEvent>? = null,
    val pauseGate: java.util.concurrent.locks.ReadWriteLock? = null,
)

/**
 * The engine behind [io.ticketing.client.TicketBroker]: argument checks, the
 * pool, acquires and releases in flight, background errors, close.
 */
internal class BrokerCore(config: BrokerConfig) {
    private val scheduler = ScheduledThreadPoolExecutor(1) { r ->
        Thread({ IoThreads.mark(); r.run() }, "ticketing-timer").apply { isDaemon = true }
    }.apply { removeOnCancelPolicy = true }
    val env = Env(config.timings, SocketOpener(config.tls), config.clientToken, scheduler, config.beforeWrite, config.pauseGate)
    private val ownExecutor: ExecutorService? = if (config.executor == null) defaultExecutor() else null

    /** Where background work of tickets (close()) and error reports run. */
    val executor: Executor = config.executor ?: ownExecutor!!
    private val eventQueue = java.util.concurrent.ConcurrentLinkedQueue<io.ticketing.client.ConnectionEvent>()
    private val delivering = AtomicBoolean()
    private val listener = config.onConnectionEvent
    val pool = Pool(env, config.addresses, if (listener == null) null else ::queueEvent)
    private val onError = config.onError
    private val acquires: MutableSet<AcquireOp> = ConcurrentHashMap.newKeySet()
    /** Releases in flight: close() waits for them, and ends those still open when it stops waiting. */
    private val releases: MutableSet<ReleaseOp> = ConcurrentHashMap.newKeySet()
    /** Extensions in flight: close() ends them at once (it waits for releases only). */
    private val extensions: MutableSet<ExtendOp> = ConcurrentHashMap.newKeySet()
    private val closed = AtomicBoolean()

    init {
        if (config.tls == io.ticketing.client.TlsMode.InsecureSkipVerify) {
            env.warn("TLS certificate verification is DISABLED (TlsMode.InsecureSkipVerify): use it only in tests")
        }
        pool.start()
    }

    val isClosed: Boolean get() = closed.get()

    /**
     * Connection events go to the listener one at a time, in the order they
     * happened, on the executor (never on an I/O thread, which a slow
     * listener would stall).
     */
    private fun queueEvent(event: io.ticketing.client.ConnectionEvent) {
        eventQueue.add(event)
        if (delivering.compareAndSet(false, true)) runOnExecutor(::deliverEvents)
    }

    private fun deliverEvents() {
        while (true) {
            val e = eventQueue.poll()
            if (e == null) {
                delivering.set(false)
                // An event queued after the poll and before the flag cleared: deliver it too.
                if (eventQueue.isEmpty() || !delivering.compareAndSet(false, true)) return
                continue
            }
            try {
                listener?.accept(e)
            } catch (t: Throwable) {
                env.warn("the connection event listener threw", t)
            }
        }
    }

    /** A snapshot of every slot. */
    fun state(): io.ticketing.client.BrokerState {
        val conns = pool.slots.map { slot ->
            val c = slot.current
            val st = c?.currentState
            io.ticketing.client.ConnectionState(
                configured = slot.configured.toString(),
                address = if (c == null || st == Connection.State.CLOSED) null else c.address.toString(),
                state = when (st) {
                    Connection.State.CONNECTING -> io.ticketing.client.ConnectionState.State.CONNECTING
                    Connection.State.HELLO -> io.ticketing.client.ConnectionState.State.GREETING
                    Connection.State.READY -> io.ticketing.client.ConnectionState.State.READY
                    Connection.State.DRAINING -> io.ticketing.client.ConnectionState.State.DRAINING
                    Connection.State.CLOSED, null -> io.ticketing.client.ConnectionState.State.DOWN
                },
                nodeName = if (st == Connection.State.READY || st == Connection.State.DRAINING) c.nodeName else null,
                lastError = slot.lastError,
            )
        }
        return io.ticketing.client.BrokerState(isClosed, conns.count { it.state == io.ticketing.client.ConnectionState.State.READY }, conns)
    }

    /** Checks the arguments (nothing is sent if they are wrong) and starts the acquire. */
    fun acquire(key: String, wait: Duration, lease: Duration, minWork: Duration, keepAlive: Boolean = false): AcquireOp {
        Keys.problem(key)?.let { throw TicketingException.InvalidArgument(it) }
        val waitSeconds = wholeSeconds("wait", wait)
        if (waitSeconds > Wire.MAX_WAIT_SECONDS) invalid("wait must be 0..255 s (rounded up), got $wait")
        val leaseSeconds = leaseSeconds(lease).toLong()
        if (minWork.isNegative) invalid("minimum work must not be negative, got $minWork")
        if (minWork > Duration.ofSeconds(Wire.MAX_LEASE_SECONDS.toLong())) {
            invalid("minimum work over 250 s is not supported (no lease is that long), got $minWork")
        }
        // Up to the rounded lease, inclusive (CLIENT.md; seed 003 rejects only a larger
        // budget). minWork == lease is sent but can never be met (the remaining time is
        // counted from the send, so some of the lease is always gone): InsufficientLease.
        if (minWork > Duration.ofSeconds(leaseSeconds)) {
            invalid("minimum work ($minWork) must not be longer than the lease ($leaseSeconds s, rounded up)")
        }
        if (closed.get()) throw TicketingException.Closed()
        val op = AcquireOp(this, key, waitSeconds.toInt(), leaseSeconds.toInt(), minWork.toNanos(), keepAlive)
        acquires.add(op)
        if (closed.get()) {
            acquires.remove(op)
            throw TicketingException.Closed()
        }
        op.start()
        return op
    }

    /** [lease] in whole seconds, rounded up; InvalidArgument outside 1..250 s. */
    fun leaseSeconds(lease: Duration): Int {
        val s = wholeSeconds("lease", lease)
        if (s < Wire.MIN_LEASE_SECONDS || s > Wire.MAX_LEASE_SECONDS) invalid("lease must be 1..250 s (rounded up), got $lease")
        return s.toInt()
    }

    /** Extends [token] of [key] by [leaseSeconds], retried until [deadlineNanos]. */
    fun extend(key: String, token: Long, leaseSeconds: Int, deadlineNanos: Long): CompletableFuture<ExtendOutcome> {
        if (closed.get()) throw TicketingException.Closed()
        val op = ExtendOp(this, key, token, leaseSeconds, deadlineNanos)
        extensions.add(op)
        op.future.whenComplete { _, _ -> extensions.remove(op) }
        if (closed.get()) op.abort(TicketingException.Closed()) else op.start()
        return op.future
    }

    /** A lease of [seconds] as this client may count on it: less the clock-rate allowance. */
    fun conservativeNanos(seconds: Int): Long = (seconds * 1_000_000_000L * (1.0 - env.timings.clockRateAllowance)).toLong()

    private fun wholeSeconds(name: String, d: Duration): Long {
        if (d.isNegative) invalid("$name must not be negative, got $d")
        if (d.seconds > 1_000_000) invalid("$name is out of range, got $d")
        return d.seconds + if (d.nano > 0) 1 else 0
    }

    private fun invalid(message: String): Nothing = throw TicketingException.InvalidArgument(message)

    fun finished(op: AcquireOp) {
        acquires.remove(op)
    }

    /**
     * Releases [token] (tracked, so close() waits for it). With [startOn], the
     * release is started by a task on that executor; its 5 s window counts
     * from now either way.
     */
    fun release(key: String, token: Long, startOn: Executor? = null): CompletableFuture<ReleaseResult> {
        val op = ReleaseOp(this, key, token)
        releases.add(op)
        op.future.whenComplete { _, _ -> releases.remove(op) }
        if (startOn == null) op.start() else runOn(startOn) { op.start() }
        return op.future
    }

    /** A grant nobody will use (aborted, or too little lease left): release exactly that token. */
    fun compensate(key: String, token: Long) {
        env.debug { "compensating release of $key token ${java.lang.Long.toUnsignedString(token)}" }
        reportFailureOf(release(key, token))
    }

    /** Reports a failure of [f], on the executor, through the error handler. */
    fun reportFailureOf(f: CompletableFuture<*>) {
        f.whenComplete { _, e ->
            if (e != null) runOnExecutor { reportError(e) }
        }
    }

    fun runOnExecutor(task: Runnable) = runOn(executor, task)

    /**
     * Runs [task], which completes a caller's future: on the executor when
     * called on one of the client's own threads (the caller's dependent stages
     * run inside the completion, and one that blocks must never stall a
     * connection's reader or the timer), inline otherwise (e.g. a cancel).
     */
    fun deliver(task: Runnable) = if (IoThreads.isCurrent()) runOnExecutor(task) else task.run()

    private fun runOn(e: Executor, task: Runnable) {
        try {
            e.execute(task)
        } catch (_: RejectedExecutionException) {
            task.run()
        }
    }

    fun reportError(e: Throwable) {
        val error = unwrap(e) as? TicketingException ?: TicketingException.Protocol("unexpected failure: $e", e)
        val handler = onError
        if (handler == null) {
            env.warn("background failure: ${error.message}", error)
            return
        }
        try {
            handler.accept(error)
        } catch (t: Throwable) {
            env.warn("the error handler threw", t)
        }
    }

    fun awaitReady(timeout: Duration): CompletableFuture<Unit> {
        if (timeout.isNegative) throw TicketingException.InvalidArgument("timeout must not be negative")
        if (closed.get()) return CompletableFuture.failedFuture(TicketingException.Closed())
        val outcome = CompletableFuture<Unit>()
        pool.awaitReady(timeout.toNanos(), failFast = true).whenComplete { _, e ->
            deliver { if (e == null) outcome.complete(Unit) else outcome.completeExceptionally(unwrap(e)) }
        }
        return outcome
    }

    /** Checks a caller's key and token for [release]; nothing is sent if they are wrong. */
    fun releaseByToken(key: String, token: Long): CompletableFuture<io.ticketing.client.ReleaseResult> {
        Keys.problem(key)?.let { throw TicketingException.InvalidArgument(it) }
        if (token == 0L) invalid("a fencing token is 1..18446744073709551615, got 0")
        if (closed.get()) throw TicketingException.Closed()
        return release(key, token)
    }

    private val closeDone = CompletableFuture<Void?>()

    /**
     * Rejects pending acquires, extensions and waitReady calls with Closed at once, then
     * waits, at most the release window in all, until every release in flight
     * has its outcome, including the compensating releases of grants that
     * arrive during close for acquires it just aborted (their half-closed
     * connections are drained first), then closes every connection. Held
     * tickets are left to their leases. Every call returns the same future.
     */
    fun closeAsync(): CompletableFuture<Void?> {
        if (!closed.compareAndSet(false, true)) return closeDone.copy()
        val closedError = TicketingException.Closed()
        // Acquires first: one waiting for a usable connection (a re-send) must end CLOSED, not TIMEOUT.
        for (op in acquires.toList()) op.abort(closedError)
        // Extensions do not hold close() up: the tickets are left to their leases.
        for (op in extensions.toList()) op.abort(closedError)
        pool.failReadyWaiters(closedError)
        val deadline = System.nanoTime() + Connection.millis(env.timings.closeWaitMillis)
        fun settledOrDue() = (releases.isEmpty() && !pool.anyDraining()) || System.nanoTime() - deadline >= 0
        if (settledOrDue() || !env.schedule(0) { pollClose(::settledOrDue) }) finishClose()
        return closeDone.copy()
    }

    /** Checks every few milliseconds whether close can go on. Runs on the timer. */
    private fun pollClose(settledOrDue: () -> Boolean) {
        if (settledOrDue() || !env.schedule(CLOSE_POLL_MILLIS) { pollClose(settledOrDue) }) finishClose()
    }

    private fun finishClose() {
        // A release's own deadline is a task of the timer that stops below: one still open now would
        // never end (a compensating release started during close, or one whose deadline the timer had
        // not reached yet). RELEASE_FAILED, as at its deadline: never assumed released.
        for (op in releases.toList()) op.closedFirst()
        pool.close()
        scheduler.shutdownNow()
        ownExecutor?.shutdown()
        closeDone.complete(null)
    }

    /** [closeAsync], parking the calling thread until it is done (at most about 5 s). */
    fun close() {
        Blocking.await(closeAsync(), onInterrupt = { false })
    }

    companion object {
        private const val CLOSE_POLL_MILLIS = 10L
        private val poolThreads = AtomicInteger()

        /**
         * Virtual threads where the JDK has them (21+), else a cached pool of
         * daemon threads: callers' stages run there, and one that blocks must
         * not make the next completion wait behind it.
         */
        fun defaultExecutor(): ExecutorService = try {
            Executors::class.java.getMethod("newVirtualThreadPerTaskExecutor").invoke(null) as ExecutorService
        } catch (_: ReflectiveOperationException) {
            ThreadPoolExecutor(0, Int.MAX_VALUE, 30, TimeUnit.SECONDS, SynchronousQueue()) { r ->
                Thread(r, "ticketing-callback-${poolThreads.incrementAndGet()}").apply { isDaemon = true }
            }
        }

        fun unwrap(e: Throwable): Throwable {
            var t = e
            while ((t is java.util.concurrent.ExecutionException || t is java.util.concurrent.CompletionException) && t.cause != null) {
                t = t.cause!!
            }
            return t
        }
    }
}
