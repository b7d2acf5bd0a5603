export { createRedisBackends, type RedisBackends, type RedisBackendsOptions } from './redis/redis-backends.js';
export { type RedisClientLike, type RedisConnectionOptions, type RedisMessageListener, type RedisSubscriberLike } from './redis/redis-connection.js';
export { createRedisEventBus, type RedisEventBus, type RedisEventBusOptions } from './redis/redis-event-bus.js';
export { createRedisInteractionStore, type RedisInteractionStore, type RedisInteractionStoreOptions } from './redis/redis-interaction-store.js';
export { createRedisSessionLog, type RedisSessionLog, type RedisSessionLogOptions } from './redis/redis-session-log.js';
