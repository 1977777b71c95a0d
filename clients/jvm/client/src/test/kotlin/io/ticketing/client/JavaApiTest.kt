package io.ticketing.client

import io.ticketing.client.seed.JavaApiUsage
import io.ticketing.client.support.RealServer
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout

/** The parity calls from Java, against the real server. */
@Timeout(60)
class JavaApiTest {
    @Test
    fun `withLockBlocking, withLockAsync, leaseEnd, release by token, refused complete - from Java`() {
        RealServer.start().use { server ->
            val seen = JavaApiUsage.run(server.address)
            // Two "connected" events (one address: two connections), delivered on the executor meanwhile.
            assertEquals(2, seen.count { it == "connected" }, "$seen")
            val rest = seen.filter { it != "connected" }
            assertTrue(rest[0] as Int in 1..2, "usable right after waitReady: ${rest[0]}")
            val first = (rest[1] as String).toULong()
            val second = (rest[2] as Long).toULong()
            assertTrue(second > first, "tokens grow: $rest")
            assertEquals(listOf("lease ended", ReleaseResult.NOT_HELD, "complete refused"), rest.subList(3, 6))
        }
    }
}
