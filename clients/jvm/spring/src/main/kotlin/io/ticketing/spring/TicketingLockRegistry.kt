package io.ticketing.spring

import io.ticketing.client.TicketBroker
import io.ticketing.client.TicketLock
import io.ticketing.client.TicketingException
import org.springframework.integration.support.locks.ExpirableLockRegistry
import org.springframework.integration.support.locks.RenewableLockRegistry
import java.time.Duration
import java.util.concurrent.ConcurrentHashMap

/**
 * A Spring Integration `LockRegistry` over a Ticketing [TicketBroker]: the
 * locks it hands out are [TicketLock]s (`java.util.concurrent.locks.Lock`),
 * each hold a fenced grant of the Ticketing server with [lease], kept alive
 * by extensions while held (unless [keepAlive] is false).
 *
 * ```kotlin
 * @Bean fun lockRegistry(broker: TicketBroker) = TicketingLockRegistry(broker, Duration.ofSeconds(30))
 *
 * val lock = registry.obtain("invoice-42")
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try {
 *         val token = registry.token("invoice-42")   // fence the write with it
 *         ...
 *     } finally { lock.unlock() }
 * }
 * ```
 *
 * Keys are `keyPrefix + lockKey.toString()`. The fencing token of the current
 * thread's hold is [token] (or `(lock as TicketLock).token`): pass it to the
 * protected resource (e.g. `io.ticketing.client.jdbc.TicketingFence`) so a
 * holder whose lease ran out while it was paused cannot overwrite its
 * successor's work. [renewLock] extends the current thread's hold.
 */
class TicketingLockRegistry @JvmOverloads constructor(
    private val broker: TicketBroker,
    /** The lease of each hold (1..250 s, rounded up). */
    val lease: Duration,
    /** Prepended to every key (e.g. `"orders/"`). */
    val keyPrefix: String = "",
    /** Whether holds are kept alive by extensions. */
    val keepAlive: Boolean = true,
) : RenewableLockRegistry, ExpirableLockRegistry {
    private class Entry(val lock: TicketLock) {
        @Volatile var lastUsedMillis = System.currentTimeMillis()
    }

    private val locks = ConcurrentHashMap<String, Entry>()

    init {
        broker.lock(keyPrefix + "x", lease, keepAlive) // checks the lease and the prefix now, not at the first obtain
    }

    /** The lock of [lockKey] (the same object for the same key until it is expired as unused). */
    override fun obtain(lockKey: Any): TicketLock {
        val key = keyPrefix + lockKey.toString()
        val entry = locks.computeIfAbsent(key) { Entry(broker.lock(it, lease, keepAlive)) }
        entry.lastUsedMillis = System.currentTimeMillis()
        return entry.lock
    }

    /** The fencing token of the current thread's hold of [lockKey]; IllegalMonitorStateException if it holds none. */
    fun token(lockKey: Any): Long = obtain(lockKey).token

    /**
     * Extends the current thread's hold of [lockKey] by [lease] (an `X` to the
     * server, same token). IllegalStateException if this thread does not hold
     * it; [TicketingException.LeaseEnded] if the grant is gone.
     */
    override fun renewLock(lockKey: Any) {
        val ticket = obtain(lockKey).ticket() ?: throw IllegalStateException("the current thread does not hold $lockKey")
        ticket.extendBlocking(lease)
    }

    /** Forgets locks not obtained for [age] ms that no thread holds. */
    override fun expireUnusedOlderThan(age: Long) {
        val before = System.currentTimeMillis() - age
        locks.entries.removeIf { (_, e) -> e.lastUsedMillis < before && !e.lock.isHeldByAnyThread }
    }
}
