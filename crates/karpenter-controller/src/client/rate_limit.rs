//! Client-side rate limiting: a token bucket (`KUBE_CLIENT_QPS` tokens per
//! second, up to `KUBE_CLIENT_BURST` saved), like client-go's default limiter.
//!
//! kube 5 has no client-side limiter, so this is a tower layer applied under
//! the client. The bucket is pure (time comes in as a value); the service
//! waits in `poll_ready` so back-pressure reaches the caller the tower way.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A token bucket. `try_take` either takes a token or says how long to wait.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_sec: f64,
    capacity: f64,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket: `burst` requests may go at once, then `qps` per second.
    pub fn new(qps: u32, burst: u32, now: Instant) -> Self {
        let capacity = f64::from(burst.max(1));
        Self {
            rate_per_sec: f64::from(qps.max(1)),
            capacity,
            tokens: capacity,
            updated: now,
        }
    }

    /// Takes a token, or returns how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate_per_sec).min(self.capacity);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - self.tokens) / self.rate_per_sec,
            ))
        }
    }
}

/// The tower layer.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitLayer {
    qps: u32,
    burst: u32,
}

impl RateLimitLayer {
    /// `qps` sustained requests per second, `burst` at most at once.
    pub fn new(qps: u32, burst: u32) -> Self {
        Self { qps, burst }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: TokenBucket::new(self.qps, self.burst, Instant::now()),
            permit: false,
            sleep: None,
        }
    }
}

/// The rate-limited service (kube's client drives one instance behind a buffer).
pub struct RateLimit<S> {
    inner: S,
    bucket: TokenBucket,
    permit: bool,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.permit {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.bucket.try_take(Instant::now()) {
                Ok(()) => self.permit = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.permit = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    #[test]
    fn a_full_bucket_lets_a_burst_through_then_paces_at_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10, 3, start);
        for i in 0..3 {
            assert_eq!(bucket.try_take(start), Ok(()), "burst request {i}");
        }
        let wait = bucket.try_take(start).expect_err("the burst is spent");
        assert!(
            (wait.as_secs_f64() - 0.1).abs() < 1e-6,
            "one token per 100 ms: {wait:?}"
        );
        assert_eq!(bucket.try_take(start + Duration::from_millis(100)), Ok(()));
        assert!(bucket.try_take(start + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_the_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(100, 2, start);
        let later = start + Duration::from_secs(60);
        assert_eq!(bucket.try_take(later), Ok(()));
        assert_eq!(bucket.try_take(later), Ok(()));
        assert!(bucket.try_take(later).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_waits_for_a_token_before_each_call_beyond_the_burst() {
        let inner = tower::service_fn(|()| async { Ok::<_, Infallible>(Instant::now()) });
        let mut service = RateLimitLayer::new(2, 1).layer(inner);
        let start = Instant::now();
        let first = service
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("call");
        let second = service
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("call");
        assert_eq!(first, start, "the burst goes at once");
        assert_eq!(
            second.duration_since(start),
            Duration::from_millis(500),
            "then 2 per second"
        );
    }
}
