package io.ticketing.client.internal

import java.util.concurrent.ThreadLocalRandom

/** Reconnect waits vary by +-20%, so clients that lost one server together do not return in lockstep. */
internal object Jitter {
    fun around(millis: Long): Long {
        if (millis <= 0) return 0
        val spread = millis / 5
        return millis - spread + ThreadLocalRandom.current().nextLong(2 * spread + 1)
    }
}
