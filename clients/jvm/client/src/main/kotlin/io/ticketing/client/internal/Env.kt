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
) {
    private val logger: System.Logger = System.getLogger("io.ticketing.client")

    /** Runs [task] on the timer after [delayMillis]; false once the broker is closed. */
    fun schedule(delayMillis: Long, task: () -> Unit): Boolean = try {
        scheduler.schedule(task, delayMillis, TimeUnit.MILLISECONDS)
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
