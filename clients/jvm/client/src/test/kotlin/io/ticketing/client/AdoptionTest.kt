package io.ticketing.client

import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * Issue 28, defect 10: Kotlin 1.9 compilers (Spring Boot 3 builds) read
 * Kotlin metadata up to version 2.0 and reject newer. The classes carry the
 * metadata of the language level they were compiled for.
 */
class AdoptionTest {
    @Test
    fun `public classes carry Kotlin metadata a Kotlin 1_9 compiler reads`() {
        for (c in listOf(TicketBroker::class.java, Ticket::class.java, TicketingException::class.java, TlsMode::class.java)) {
            val mv = c.getAnnotation(Metadata::class.java).metadataVersion
            val (major, minor) = mv[0] to mv[1]
            assertTrue(major < 2 || (major == 2 && minor == 0), "${c.name} has metadata ${mv.joinToString(".")}; Kotlin 1.9 reads at most 2.0")
        }
    }
}
