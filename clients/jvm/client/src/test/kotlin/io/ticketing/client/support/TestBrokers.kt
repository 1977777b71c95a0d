package io.ticketing.client.support

import io.ticketing.client.TicketBroker
import io.ticketing.client.TicketingException
import io.ticketing.client.internal.Timings
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import java.util.function.Consumer

/** Short timings so fault tests run in well under a second each; the contract values are pinned in TimingsTest. */
internal val FAST = Timings(
    reconnectMillis = 300,
    pingIntervalMillis = 5_000, // as in production: scripted servers need not answer pings (PingTest shortens it)
    pingTimeoutMillis = 5_000,
    busyPingIntervalMillis = 5_000, // likewise with requests outstanding (Round3Test checks the 750 ms busy ping)
    busyPongTimeoutMillis = 5_000,
    replyGraceMillis = 800,
    releaseWindowMillis = 1_500,
    releaseRetryMillis = 50,
    earlyTimeoutMillis = 100,
    connectTimeoutMillis = 3_000, // generous: a starved CI machine must not turn into a flaky test
    helloTimeoutMillis = 3_000,
    drainTimeoutMillis = 1_000,
    closeWaitMillis = 1_500,
    tickMillis = 20,
)

/** Errors reported through the broker's error handler. */
class ErrorSink : Consumer<TicketingException> {
    val errors = CopyOnWriteArrayList<TicketingException>()
    val threads = CopyOnWriteArrayList<Thread>()
    private val latch = java.util.concurrent.Semaphore(0)
    override fun accept(t: TicketingException) {
        errors.add(t)
        threads.add(Thread.currentThread())
        latch.release()
    }

    fun await(timeoutMillis: Long = 5_000): TicketingException {
        if (!latch.tryAcquire(timeoutMillis, java.util.concurrent.TimeUnit.MILLISECONDS)) throw AssertionError("no error reported")
        return errors.last()
    }
}

internal fun fastBroker(vararg addrs: String, timings: Timings = FAST, configure: TicketBroker.Builder.() -> Unit = {}): TicketBroker =
    TicketBroker.builder().addrs(*addrs).timings(timings).apply(configure).connect()

fun secs(n: Long): Duration = Duration.ofSeconds(n)
fun millis(n: Long): Duration = Duration.ofMillis(n)
