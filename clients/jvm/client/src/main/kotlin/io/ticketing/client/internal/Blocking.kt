package io.ticketing.client.internal

import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException

/** Parking on a future for the `*Blocking` calls (virtual-thread friendly: no monitors). */
internal object Blocking {
    /**
     * Waits for [f]. On interrupt, calls [onInterrupt] (which aborts the
     * operation if it can) and, unless [f] finished meanwhile, throws a
     * CancellationException; the interrupt flag is set again either way.
     * Failures are rethrown unwrapped (a TicketingException, usually).
     */
    fun <T> await(f: CompletableFuture<T>, onInterrupt: () -> Unit): T {
        try {
            return try {
                f.get()
            } catch (e: InterruptedException) {
                onInterrupt()
                Thread.currentThread().interrupt()
                if (!f.isDone || f.isCancelled) throw CancellationException("interrupted").apply { initCause(e) }
                f.getNow(null)
            }
        } catch (e: ExecutionException) {
            throw BrokerCore.unwrap(e)
        } catch (e: java.util.concurrent.CompletionException) {
            throw BrokerCore.unwrap(e)
        }
    }
}
