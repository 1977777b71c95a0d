package io.ticketing.client.internal

import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException

/** Parking on a future for the `*Blocking` calls (virtual-thread friendly: no monitors). */
internal object Blocking {
    /**
     * Waits for [f]. On interrupt, calls [onInterrupt], which says whether the
     * operation was given up: then a CancellationException is thrown. If it
     * was not (an acquire whose grant was already decided, a close), the
     * outcome is waited for without further interrupts and returned, so a
     * decided grant is never lost between the interrupt and its delivery.
     * The interrupt flag is set again either way. Failures are rethrown
     * unwrapped (a TicketingException, usually).
     */
    fun <T> await(f: CompletableFuture<T>, onInterrupt: () -> Boolean): T {
        try {
            return try {
                f.get()
            } catch (e: InterruptedException) {
                if (onInterrupt()) {
                    Thread.currentThread().interrupt()
                    throw CancellationException("interrupted").apply { initCause(e) }
                }
                try {
                    uninterruptibly(f)
                } finally {
                    Thread.currentThread().interrupt()
                }
            }
        } catch (e: ExecutionException) {
            throw BrokerCore.unwrap(e)
        } catch (e: java.util.concurrent.CompletionException) {
            throw BrokerCore.unwrap(e)
        }
    }

    private fun <T> uninterruptibly(f: CompletableFuture<T>): T {
        while (true) {
            try {
                return f.get()
            } catch (_: InterruptedException) {
                // keep waiting: the outcome is already decided, and the flag is restored by the caller
            }
        }
    }
}
