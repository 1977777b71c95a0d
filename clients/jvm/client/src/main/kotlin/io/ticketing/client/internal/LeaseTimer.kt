package io.ticketing.client.internal

import java.util.concurrent.ForkJoinPool
import java.util.concurrent.ScheduledFuture
import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.TimeUnit

/**
 * The lease timers of every ticket (lease end, keep-alive), shared by all
 * brokers: a held ticket outlives its broker's close(). Tasks are cancelled
 * when their ticket is released, so nothing keeps a released ticket alive.
 * The tasks run on the JDK's common pool, since callers' lease-end stages
 * run inside them.
 */
internal object LeaseTimer {
    private val timer = ScheduledThreadPoolExecutor(1) { r ->
        Thread({ IoThreads.mark(); r.run() }, "ticketing-lease-timer").apply { isDaemon = true }
    }.apply { removeOnCancelPolicy = true }

    /** Runs [task] at monotonic time [nanos] (at once if it has passed). */
    fun at(nanos: Long, task: () -> Unit): ScheduledFuture<*> =
        timer.schedule({ ForkJoinPool.commonPool().execute(task) }, maxOf(0L, nanos - System.nanoTime()), TimeUnit.NANOSECONDS)

    /** Tasks waiting (for tests). */
    val queued: Int get() = timer.queue.size
}
