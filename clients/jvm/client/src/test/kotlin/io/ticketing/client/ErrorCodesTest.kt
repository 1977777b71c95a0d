package io.ticketing.client

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import java.nio.file.Files
import java.nio.file.Paths

/** The error codes: the same as the TypeScript client's, one class each, all documented. */
class ErrorCodesTest {
    private val contract = listOf(
        "INVALID_ARGUMENT", "NO_CONNECTION", "TIMEOUT", "CAPACITY", "INDETERMINATE", "INSUFFICIENT_LEASE",
        "LEASE_ENDED", "RELEASED", "RELEASE_FAILED", "CLOSED", "PROTOCOL", "AUTH", "PERMISSION",
    )

    private fun instances(): List<TicketingException> = listOf(
        TicketingException.InvalidArgument("x"),
        TicketingException.NoConnection("x"),
        TicketingException.Timeout("k"),
        TicketingException.Capacity("k"),
        TicketingException.Indeterminate("k", "x"),
        TicketingException.InsufficientLease("k", 1, 0, 1),
        TicketingException.LeaseEnded("k"),
        TicketingException.Released("k"),
        TicketingException.ReleaseFailed("k", 1, "x"),
        TicketingException.Closed(),
        TicketingException.Protocol("x"),
        TicketingException.Auth("x"),
        TicketingException.Permission("x"),
    )

    @Test
    fun `one subclass per code, codes as in CLIENT md`() {
        assertEquals(contract, instances().map { it.code })
        val subclasses = TicketingException::class.java.declaredClasses
            .filter { TicketingException::class.java.isAssignableFrom(it) }
            .map { it.simpleName }.toSet()
        assertEquals(instances().map { it.javaClass.simpleName }.toSet(), subclasses)
    }

    @Test
    fun `every code and class is documented in docs client-jvm md`() {
        val doc = Files.readString(io.ticketing.client.support.Repo.root.resolve("docs/client-jvm.md"))
        for (e in instances()) {
            assertEquals(true, doc.contains("`${e.code}`"), "code ${e.code} missing from the docs")
            assertEquals(true, doc.contains("TicketingException.${e.javaClass.simpleName}"), "${e.javaClass.simpleName} missing from the docs")
        }
    }
}
