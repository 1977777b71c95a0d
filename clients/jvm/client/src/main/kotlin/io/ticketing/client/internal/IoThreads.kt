package io.ticketing.client.internal

/** The client's own threads (readers, writers, the timer), on which no caller code may run. */
internal object IoThreads {
    private val flag = ThreadLocal.withInitial { false }

    fun mark() = flag.set(true)

    fun isCurrent(): Boolean = flag.get()
}
