package io.ticketing.client

import io.ticketing.client.support.Postgres
import io.ticketing.client.support.RealServer
import io.ticketing.example.FencedCounter
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout

/** examples/jvm's FencedCounter, as shipped, against a real server and a throw-away PostgreSQL. */
@Timeout(90)
class ExampleTest {
    @Test
    fun `the fenced counter example counts every increment exactly once`() {
        RealServer.assumeAvailable()
        Postgres.start().use { pg ->
            RealServer.start().use { server ->
                val result = FencedCounter.run(server.address, pg.url + "?user=test")
                assertArrayEquals(longArrayOf(20, 20), result)
            }
        }
    }
}
