//! What naming a request's principal costs `rudder mcp --http`, per
//! request (`cargo bench -p rudder-mcp --bench auth`):
//!
//! - `jwt/verify/ALG` (RS256, ES256, EdDSA): a JWT access token checked
//!   from scratch against a JWKS of three keys (header, key by `kid`,
//!   signature, issuer, audience, expiry, `sub`), as for a token's first
//!   request;
//! - `jwt/request/ALG`: what the guard spends on every later request with
//!   that token (the verified tokens are remembered until they expire);
//!   the target for a request is at most 50 µs;
//! - `tokens/N`: a named token found among N (by its SHA-256), and a token
//!   that is none of them.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jsonwebtoken::Algorithm;
use rudder_mcp::auth::{Auth, Jwt, JwtOptions, parse_tokens};

#[path = "../tests/fixtures/keys.rs"]
mod keys;

fn auth(c: &mut Criterion) {
    let k = keys::make();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, k.jwks.to_string()).expect("the JWKS written");
    let jwt = Jwt::load(&JwtOptions {
        jwks: path,
        issuer: keys::ISSUER.into(),
        resource: keys::RESOURCE.into(),
        audience: None,
    })
    .expect("the JWKS loads");
    let auth = Auth {
        jwt: Some(jwt),
        issuer: keys::ISSUER.into(),
        ..Auth::default()
    };
    let mut g = c.benchmark_group("jwt");
    g.measurement_time(Duration::from_secs(3));
    for (name, key, alg, kid) in [
        ("RS256", &k.rsa, Algorithm::RS256, "test-rsa"),
        ("ES256", &k.ec, Algorithm::ES256, "test-ec"),
        ("EdDSA", &k.ed, Algorithm::EdDSA, "test-ed"),
    ] {
        let header = format!(
            "Bearer {}",
            keys::sign(key, alg, kid, &keys::claims("carol"))
        );
        assert!(auth.principal(Some(&header)).is_ok(), "{name} verifies");
        // Every request after the first with the same token.
        g.bench_function(BenchmarkId::new("request", name), |b| {
            b.iter(|| black_box(auth.principal(black_box(Some(&header)))))
        });
        // The first request with a token: the whole check.
        let token = &header["Bearer ".len()..];
        let jwt = auth.jwt.as_ref().expect("JWTs");
        g.bench_function(BenchmarkId::new("verify", name), |b| {
            b.iter(|| black_box(jwt.verify(black_box(token))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("tokens");
    g.measurement_time(Duration::from_secs(2));
    for n in [1usize, 100, 10_000] {
        let text: String = (0..n)
            .map(|i| format!("agent-{i} token-of-agent-{i:08}-0123456789\n"))
            .collect();
        let auth = Auth {
            tokens: parse_tokens(&text).expect("the tokens parse"),
            ..Auth::default()
        };
        let last = format!("Bearer token-of-agent-{:08}-0123456789", n - 1);
        g.bench_with_input(BenchmarkId::new("found", n), &last, |b, h| {
            b.iter(|| black_box(auth.principal(black_box(Some(h)))))
        });
        let wrong = "Bearer token-of-nobody-at-all-0123456789".to_string();
        g.bench_with_input(BenchmarkId::new("refused", n), &wrong, |b, h| {
            b.iter(|| black_box(auth.principal(black_box(Some(h)))))
        });
    }
    g.finish();
}

criterion_group!(benches, auth);
criterion_main!(benches);
