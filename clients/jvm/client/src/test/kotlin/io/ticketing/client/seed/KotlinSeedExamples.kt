package io.ticketing.client.seed

import io.ticketing.client.Ticket
import io.ticketing.client.TicketBroker
import io.ticketing.client.TlsMode
import java.time.Duration
import java.util.concurrent.Executor

// The Kotlin examples of the library documentation (seed 003, docs/client-jvm.md),
// verbatim inside functions: if one of them stops compiling, the build fails.
// SeedExamplesTest runs them against the real server. The one difference: the
// documentation's "127.0.0.1:5225" is the parameter `addr` here, so that the
// test uses a server on a free port (tests never take the default port).

/** Kotlin (coroutines), as written in the documentation; returns the token. */
suspend fun kotlinCoroutinesExample(addr: String): Long {
    val broker = TicketBroker.connect(addr)
    broker.waitReady(Duration.ofSeconds(5))

    val ticket = broker.acquire("key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))
    val token = ticket.token
    // In the same DB transaction: verify/update token high-water and perform the business write.
    ticket.release()
    broker.close()
    return token
}

/**
 * The builder with token and TLS, as written. COMPILE CHECK ONLY: never call
 * it, its addresses are not on this machine (tests only talk to loopback).
 */
fun builderExample(): TicketBroker {
    val broker = TicketBroker.builder()
        .addrs("10.0.0.1:5225", "10.0.0.2:5225", "10.0.0.3:5225")
        .token("123")
        .tls(TlsMode.SystemRoots)
        // .tls(TlsMode.Ca("ca.crt"))
        // .tls(TlsMode.InsecureSkipVerify)
        .connect()
    return broker
}

/** The other TLS modes of the same example, so they compile too. */
fun tlsModes(): List<TlsMode> = listOf(TlsMode.Ca("ca.crt"), TlsMode.InsecureSkipVerify, TlsMode.SystemRoots, TlsMode.Off)

// Stand-ins for the Spring annotations, so the controller below compiles without Spring.
annotation class RestController
annotation class PostMapping(val value: String)
annotation class PathVariable

@RestController
class OrderController(private val broker: TicketBroker) {
    @PostMapping("/orders/{id}")
    fun place(@PathVariable id: String): String {
        broker.acquireBlocking("order-$id", Duration.ofSeconds(5), Duration.ofSeconds(30)).use {
            // critical section
        }
        return "ok"
    }
}

/** The executor example; [applicationTaskExecutor] plays Spring's bean of that name. */
fun executorExample(applicationTaskExecutor: Executor, addr: String): TicketBroker =
    TicketBroker.builder()
        .addrs(addr)
        .executor(applicationTaskExecutor)
        .connect()

@Suppress("unused")
private fun typesUsed(t: Ticket) = t.key
