package io.ticketing.client.internal

import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.ScheduledExecutorService
import java.util.concurrent.TimeUnit

/** What every part of one broker shares: settings, the timer, logging. */
internal class Env(
    val timings: Timings,
    val opener: SocketOpener,
    val clientToken: String?,
    val scheduler: ScheduledExecutorService,
    /** Test hook: called by each writer before it takes the next batch (lets a test hold requests unsent). */
    val beforeWrite: (() -> Unit)? = null,
    /**
     * Test hook: while a test holds its write lock, every thread of this
     * broker (readers, writers, timers, lease timers) stops at its next
     * [gate], as if the process were paused.
     */
    private val pauseGate: java.util.concurrent.locks.ReadWriteLock? = null,
) {
    /** Waits here while a test pauses the client (see [pauseGate]); free otherwise. */
    fun gate() {
        val l = pauseGate?.readLock() ?: return
        l.lock()
        l.unlock()
    }
    private val logger: System.Logger = System.getLogger("io.ticketing.client")

    /** Runs [task] on the timer after [delayMillis]; false once the broker is closed. */
    fun schedule(delayMillis: Long, task: () -> Unit): Boolean = try {
        scheduler.schedule({ gate(); task() }, delayMillis, TimeUnit.MILLISECONDS)
        true
    } catch (_: RejectedExecutionException) {
        false
    }

    fun debug(message: () -> String) {
        if (logger.isLoggable(System.Logger.Level.DEBUG)) logger.log(System.Logger.Level.DEBUG, message())
    }

    fun warn(message: String, cause: Throwable? = null) {
        logger.log(System.Logger.Level.WARNING, message, cause)
    }
}
