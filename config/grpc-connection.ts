import { InterceptingCall, type Interceptor, Metadata, status } from '@grpc/grpc-js';
import {
  Connection,
  type ConnectionOptions,
  defaultGrpcRetryOptions,
  makeGrpcRetryInterceptor,
} from '@temporalio/client';

/**
 * A retry that outlives its connection ends as a CANCELLED call instead of an uncaught exception.
 *
 * @temporalio/client retries a call that failed with a retryable status (UNAVAILABLE, RESOURCE_EXHAUSTED, ...) from
 * a backoff timer. When the connection was closed in between, the timer's new attempt reaches grpc-js's shut-down
 * channel, which throws "Channel has been shut down" from inside the timer: nobody can catch it, and the process (a
 * worker at shutdown, a test file at its end) dies of it. This interceptor sits below the retry interceptor: a
 * retry's attempt on a closed channel ends with CANCELLED, which the retry interceptor hands to the caller as the
 * call's failure. A first attempt on a closed connection still throws where it is made, as grpc-js does.
 */
export function closedChannelGuard(): Interceptor {
  const attempted = new WeakSet<object>();
  return (options, nextCall) => {
    // The retry interceptor passes the same call options to every attempt of one call.
    const retry = attempted.has(options);
    attempted.add(options);
    try {
      return new InterceptingCall(nextCall(options));
    } catch (error) {
      if (!retry) throw error;
      return new InterceptingCall(endedCall(`the connection to Temporal is closed (${(error as Error).message})`));
    }
  };
}

/** A call that ends with CANCELLED as soon as it starts, sending nothing. */
function endedCall(details: string): ConstructorParameters<typeof InterceptingCall>[0] {
  return {
    cancelWithStatus() {},
    getPeer: () => 'closed',
    start(_metadata, listener) {
      setImmediate(() => listener?.onReceiveStatus?.({ code: status.CANCELLED, details, metadata: new Metadata() }));
    },
    sendMessageWithContext() {},
    sendMessage() {},
    startRead() {},
    halfClose() {},
    getAuthContext: () => null,
  };
}

/** Connection options with the guard below the interceptors given (by default @temporalio/client's retry). */
export function guardedConnectionOptions(options: ConnectionOptions = {}): ConnectionOptions {
  const interceptors = options.interceptors ?? [makeGrpcRetryInterceptor(defaultGrpcRetryOptions())];
  return { ...options, interceptors: [...interceptors, closedChannelGuard()] };
}

/** Connection.connect with the closed-channel guard: what every grpc-js connection of ours opens with. */
export function connectGrpc(options: ConnectionOptions = {}): Promise<Connection> {
  return Connection.connect(guardedConnectionOptions(options));
}

/** Connection.lazy with the closed-channel guard. */
export function lazyGrpc(options: ConnectionOptions = {}): Connection {
  return Connection.lazy(guardedConnectionOptions(options));
}
