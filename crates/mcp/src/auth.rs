//! Who is calling over HTTP: the principals of `rudder mcp --http`.
//!
//! A request's `Authorization: Bearer TOKEN` names a principal, one of:
//!
//! - a named token of a tokens file (`--tokens FILE`: `NAME TOKEN` or
//!   `NAME sha256:HEX` a line), or the single token of `--token-file` /
//!   `$RUDDER_MCP_TOKEN`, whose principal is [`SINGLE_TOKEN_NAME`];
//! - a JWT access token (`--jwks FILE --issuer URL --resource URL`): the
//!   server is an OAuth 2.1 resource server (the MCP authorization spec);
//!   the signature is checked against the JWKS, and the issuer, the
//!   audience and the expiry; the principal is the token's `sub`.
//!
//! Nothing here ever puts a token in a message: a refusal names the file
//! and the line, or why a JWT was refused, never the token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

/// The principal of the single bearer token of `--token-file` or
/// `$RUDDER_MCP_TOKEN`.
pub const SINGLE_TOKEN_NAME: &str = "mcp-token";

/// The shortest plain token taken: a guessable token is no guard.
const MIN_TOKEN_CHARS: usize = 16;

/// The authenticated principal of an HTTP request, in the request's
/// extensions for the server to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal(pub Arc<str>);

impl Principal {
    /// The principal's name (a tokens file's NAME, a JWT's `sub`).
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// The SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Named bearer tokens, by the SHA-256 of the token (a file may hold the
/// hash alone, and the server never keeps a plain token it does not need).
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_hash: HashMap<[u8; 32], Principal>,
}

impl Tokens {
    /// No token at all.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// The principal whose token is `token`, if any. The lookup is by the
    /// token's SHA-256: how long it takes says nothing about how close a
    /// wrong token came to a right one.
    pub fn principal(&self, token: &str) -> Option<&Principal> {
        self.by_hash.get(&sha256(token.as_bytes()))
    }

    /// Add the single token of `--token-file` / `$RUDDER_MCP_TOKEN` as
    /// [`SINGLE_TOKEN_NAME`]; refused if a tokens file already has that
    /// name or that token.
    pub fn add_single(&mut self, token: &str) -> Result<(), String> {
        if self.by_hash.values().any(|p| p.name() == SINGLE_TOKEN_NAME) {
            return Err(format!(
                "the tokens file names {SINGLE_TOKEN_NAME:?}, the principal of the single token ($RUDDER_MCP_TOKEN or --token-file): rename it, or give one of them only"
            ));
        }
        let hash = sha256(token.as_bytes());
        if self.by_hash.contains_key(&hash) {
            return Err(
                "the single token ($RUDDER_MCP_TOKEN or --token-file) is also in the tokens file; give it once"
                    .into(),
            );
        }
        self.by_hash
            .insert(hash, Principal(Arc::from(SINGLE_TOKEN_NAME)));
        Ok(())
    }
}

/// Read the tokens file at `path`: refused unless its owner alone may read
/// it, and for a line that is not `NAME TOKEN` / `NAME sha256:HEX`, a name
/// a principal cannot have, or a name or token given twice (each with its
/// line number, never the token).
pub fn load_tokens(path: &Path) -> Result<Tokens, String> {
    private(path, "the tokens file")?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the tokens file {}: {e}", path.display()))?;
    parse_tokens(&text).map_err(|e| format!("the tokens file {}: {e}", path.display()))
}

/// The tokens of a tokens file's `text`.
pub fn parse_tokens(text: &str) -> Result<Tokens, String> {
    let mut tokens = Tokens::default();
    // Where each name and each hash was first given, for the message.
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut lines: HashMap<[u8; 32], usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(name), Some(secret), None) = (fields.next(), fields.next(), fields.next()) else {
            // The line may hold a token: it is not quoted.
            return Err(format!(
                "line {n}: expected `NAME TOKEN` or `NAME sha256:HEX` (two fields)"
            ));
        };
        // The token first, and neither field quoted: a line written
        // `TOKEN NAME` holds the token where the name belongs.
        let hash = match secret.strip_prefix("sha256:") {
            Some(hex) => from_hex(hex).ok_or_else(|| {
                format!("line {n}: sha256: takes 64 hexadecimal digits (the token's SHA-256)")
            })?,
            None if secret.chars().count() < MIN_TOKEN_CHARS => {
                return Err(format!(
                    "line {n}: the second field, the token, is shorter than {MIN_TOKEN_CHARS} characters (a line is `NAME TOKEN`)"
                ));
            }
            None => sha256(secret.as_bytes()),
        };
        rudder_model::task::check_author(name)
            .map_err(|e| format!("line {n}: the first field cannot be a principal's name: {e}"))?;
        if let Some(first) = names.get(name) {
            return Err(format!(
                "line {n}: the name {name:?} is also on line {first}; a name is given once"
            ));
        }
        if let Some(first) = lines.get(&hash) {
            return Err(format!(
                "line {n}: the token of {name:?} is also on line {first}; each principal needs a token of its own"
            ));
        }
        names.insert(name.to_string(), n);
        lines.insert(hash, n);
        tokens.by_hash.insert(hash, Principal(Arc::from(name)));
    }
    Ok(tokens)
}

/// 32 bytes from 64 hexadecimal digits.
fn from_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Refuse a file of secrets (`what`: "the token file") whose mode lets
/// group or others read or write it, as `ssh` refuses such a key.
#[cfg(unix)]
pub(crate) fn private(path: &Path, what: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{what} {} is open to group or others (mode {mode:03o}); bearer tokens must be private to their owner: run `chmod 600 {}` and start again",
            path.display(),
            path.display()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn private(_path: &Path, _what: &str) -> Result<(), String> {
    Ok(())
}

/// Where JWT access tokens are checked against: `--jwks`, `--issuer`,
/// `--resource`, `--audience`.
#[derive(Debug, Clone)]
pub struct JwtOptions {
    /// The JWKS file (the authorization server's public keys).
    pub jwks: PathBuf,
    /// The authorization server: a token's `iss` must be this.
    pub issuer: String,
    /// This server's canonical URL (`https://mcp.example.com/mcp`): the
    /// protected resource metadata's `resource`.
    pub resource: String,
    /// A token's `aud` must hold this (default: `resource`, as RFC 8707
    /// and the MCP authorization spec bind a token to its resource).
    pub audience: Option<String>,
}

/// One public key of the JWKS, ready to check signatures.
struct Key {
    kid: Option<String>,
    key: DecodingKey,
    /// Takes only the key's own algorithm: a token that names another
    /// (`HS256` against an RSA key, `none`) is refused.
    validation: Validation,
}

/// JWT access tokens checked against a JWKS.
pub struct Jwt {
    keys: Vec<Key>,
    resource: String,
    /// Tokens that verified, by their SHA-256, with their principal and
    /// expiry: a client sends its access token with every request for the
    /// token's lifetime, and a signature check costs tens of microseconds
    /// (ES256 most), a lookup a fraction of one. The key is the whole
    /// token's hash, so a token changed in any byte is checked anew; the
    /// JWKS is read once, so a verified token stays verified until its
    /// `exp`.
    verified: Mutex<HashMap<[u8; 32], Verified>>,
}

/// A token that verified: its principal, and when it expires (`exp`, in
/// seconds since the epoch).
#[derive(Clone)]
struct Verified {
    principal: Principal,
    exp: i64,
}

/// How many verified tokens are kept at most (then the expired ones are
/// dropped, or all if none is).
const MAX_VERIFIED: usize = 4096;

/// The leeway on `exp` and `nbf`, in seconds: the validation's default.
const LEEWAY: i64 = 60;

/// Why a JWT without its claims is refused.
const CLAIMS: &str = "its claims are missing or malformed (exp, iss, aud and sub are required)";

/// What a JWT must carry: `sub` is the principal (`iss`, `aud` and `exp`
/// are checked by the validation).
#[derive(serde::Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
}

impl Jwt {
    /// Read the JWKS of `options`: refused (with the file's path) when it
    /// cannot be read, is not a JWKS, holds no key, a symmetric key, a key
    /// this server cannot use, or a key id twice.
    pub fn load(options: &JwtOptions) -> Result<Jwt, String> {
        let path = options.jwks.display();
        let text = std::fs::read_to_string(&options.jwks)
            .map_err(|e| format!("cannot read the JWKS file {path}: {e}"))?;
        let set: JwkSet = serde_json::from_str(&text)
            .map_err(|e| format!("the JWKS file {path} is not a JSON Web Key Set: {e}"))?;
        if set.keys.is_empty() {
            return Err(format!("the JWKS file {path} holds no key"));
        }
        let audience = options.audience.as_deref().unwrap_or(&options.resource);
        let mut keys: Vec<Key> = Vec::new();
        for (i, jwk) in set.keys.iter().enumerate() {
            let kid = jwk.common.key_id.clone();
            let which = match &kid {
                Some(k) => format!("key {:?}", rudder_model::text::clean(k, 60)),
                None => format!("key {}", i + 1),
            };
            let algorithm =
                algorithm(jwk).map_err(|why| format!("the JWKS file {path}: {which}: {why}"))?;
            let key = DecodingKey::from_jwk(jwk)
                .map_err(|e| format!("the JWKS file {path}: {which}: {e}"))?;
            if keys.iter().any(|k| k.kid == kid) {
                return Err(format!(
                    "the JWKS file {path}: {which} is given twice; each key needs an id of its own"
                ));
            }
            let mut validation = Validation::new(algorithm);
            validation.set_issuer(&[&options.issuer]);
            validation.set_audience(&[audience]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            validation.validate_nbf = true;
            keys.push(Key {
                kid,
                key,
                validation,
            });
        }
        Ok(Jwt {
            keys,
            resource: options.resource.clone(),
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// The principal of the JWT `token`, or why it is refused (never the
    /// token itself).
    pub fn principal(&self, token: &str) -> Result<Principal, &'static str> {
        let hash = sha256(token.as_bytes());
        let now = chrono::Utc::now().timestamp();
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        match verified.get(&hash) {
            Some(v) if now <= v.exp.saturating_add(LEEWAY) => return Ok(v.principal.clone()),
            // Expired since: checked again below, which says so.
            Some(_) => {
                verified.remove(&hash);
            }
            None => {}
        }
        // Not held while the signature is checked: other requests go on.
        drop(verified);
        let (principal, exp) = self.verify(token)?;
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.retain(|_, v| now <= v.exp.saturating_add(LEEWAY));
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(
            hash,
            Verified {
                principal: principal.clone(),
                exp,
            },
        );
        Ok(principal)
    }

    /// Check the JWT `token` from scratch (no cache): its principal and its
    /// `exp`, or why it is refused (never the token itself).
    pub fn verify(&self, token: &str) -> Result<(Principal, i64), &'static str> {
        // `alg: none` (and any name the library does not know) fails here.
        let header = jsonwebtoken::decode_header(token).map_err(|_| "it is not a signed JWT")?;
        let key = match &header.kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            // Without a key id, only a set of one key says which.
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or("it is signed with a key the server does not know")?;
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &key.validation).map_err(
            |e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => "it has expired",
                jsonwebtoken::errors::ErrorKind::ImmatureSignature => "it is not valid yet",
                jsonwebtoken::errors::ErrorKind::InvalidAudience => {
                    "it is for another audience (resource)"
                }
                jsonwebtoken::errors::ErrorKind::InvalidIssuer => "it is from another issuer",
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                    "it names an algorithm its key does not take"
                }
                // A claim missing, or claims that do not read (`sub` is
                // read after the checks).
                jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(_)
                | jsonwebtoken::errors::ErrorKind::Json(_) => CLAIMS,
                _ => "its signature does not verify",
            },
        )?;
        rudder_model::task::check_author(&data.claims.sub)
            .map_err(|_| "its sub cannot be a principal's name")?;
        Ok((Principal(Arc::from(data.claims.sub)), data.claims.exp))
    }

    /// The protected resource metadata (RFC 9728) of this server.
    pub fn metadata(&self, issuer: &str) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "rudder mcp",
        })
    }

    /// The resource URL (`--resource`).
    pub fn resource(&self) -> &str {
        &self.resource
    }
}

/// The algorithm a JWKS key verifies: its `alg`, else the one its type and
/// curve imply. A symmetric key is refused: a public JWKS holding an HMAC
/// secret would let anyone who reads it mint tokens.
fn algorithm(jwk: &Jwk) -> Result<Algorithm, &'static str> {
    let implied = match &jwk.algorithm {
        AlgorithmParameters::OctetKey(_) => {
            return Err("a symmetric (oct) key; only public keys are taken (RS256, ES256, EdDSA)");
        }
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return Err("an EC key on a curve other than P-256 or P-384"),
        },
        AlgorithmParameters::OctetKeyPair(p) => match p.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            _ => return Err("an OKP key on a curve other than Ed25519"),
        },
    };
    let Some(named) = jwk.common.key_algorithm else {
        return Ok(implied);
    };
    let named = match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return Err("its alg is not a signature algorithm of public keys"),
    };
    // An `alg` of another family than the key (RS256 on an EC key) would
    // never verify: say so at start.
    if family(named) != family(implied) {
        return Err("its alg does not fit its key type");
    }
    Ok(named)
}

/// The key family of an algorithm, to compare a key's `alg` with its type.
fn family(a: Algorithm) -> u8 {
    match a {
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => 0,
        Algorithm::ES256 | Algorithm::ES384 => 1,
        Algorithm::EdDSA => 2,
        _ => 3,
    }
}

/// How requests are authorized over HTTP: named tokens, JWTs, or both.
#[derive(Default)]
pub struct Auth {
    /// Named tokens (and the single token).
    pub tokens: Tokens,
    /// JWT access tokens, if configured.
    pub jwt: Option<Jwt>,
    /// The issuer JWTs must come from (the metadata's authorization server).
    pub issuer: String,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that names no principal; why, for a JWT.
    Invalid(&'static str),
}

impl Auth {
    /// The single token of `$RUDDER_MCP_TOKEN` / `--token-file` alone (the
    /// demo's), or nothing.
    pub fn single(token: Option<&str>) -> Auth {
        let mut auth = Auth::default();
        if let Some(t) = token {
            // An empty set cannot already hold the name or the token.
            let _ = auth.tokens.add_single(t);
        }
        auth
    }

    /// Whether any authorization is configured (else the server is open,
    /// loopback only).
    pub fn is_set(&self) -> bool {
        !self.tokens.is_empty() || self.jwt.is_some()
    }

    /// The principal of a request's `Authorization` header value.
    pub fn principal(&self, header: Option<&str>) -> Result<Principal, Refusal> {
        // The scheme's name is case-insensitive (RFC 9110 section 11.1).
        let token = header
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Missing)?;
        if let Some(p) = self.tokens.principal(token) {
            return Ok(p.clone());
        }
        match &self.jwt {
            // Only what looks like a JWT (three parts) is decoded as one.
            Some(jwt) if token.split('.').count() == 3 => {
                jwt.principal(token).map_err(Refusal::Invalid)
            }
            _ => Err(Refusal::Invalid("it is not a token of this server")),
        }
    }

    /// The URL of the protected resource metadata, for `WWW-Authenticate`
    /// (with JWTs only: named tokens have no authorization server).
    pub fn metadata_url(&self) -> Option<String> {
        let jwt = self.jwt.as_ref()?;
        let (base, path) = split_url(jwt.resource());
        Some(format!("{base}{WELL_KNOWN}{path}"))
    }

    /// The metadata's paths on this server: RFC 9728's, with the
    /// resource's path after the well-known name, and the bare one that
    /// clients also try.
    pub fn metadata_paths(&self) -> Vec<String> {
        let Some(jwt) = &self.jwt else {
            return Vec::new();
        };
        let (_, path) = split_url(jwt.resource());
        let mut paths = vec![WELL_KNOWN.to_string()];
        if !path.is_empty() && path != "/" {
            paths.push(format!("{WELL_KNOWN}{path}"));
        }
        paths
    }
}

/// RFC 9728's well-known name for protected resource metadata.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `https://host:port` and `/path` of a URL.
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "alpha-token-0123456789";
    const B: &str = "bravo-token-0123456789";

    #[test]
    fn a_tokens_file_names_its_principals() {
        let hash_b: String = sha256(B.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let text = format!("# agents\n\nalice {A}\n  bob sha256:{hash_b}  \n");
        let tokens = parse_tokens(&text).expect("parses");
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens.principal(A).map(Principal::name), Some("alice"));
        assert_eq!(tokens.principal(B).map(Principal::name), Some("bob"));
        assert_eq!(tokens.principal("alpha-token-012345678"), None);
    }

    #[test]
    fn a_bad_tokens_file_is_refused_by_line_without_the_token() {
        for (text, wanted) in [
            (
                format!("a {A}\na {B}\n"),
                "line 2: the name \"a\" is also on line 1",
            ),
            (
                format!("a {A}\n# x\nb {A}\n"),
                "line 3: the token of \"b\" is also on line 1",
            ),
            (format!("a {A} extra\n"), "line 1: expected"),
            (
                "a short\n".to_string(),
                "line 1: the second field, the token, is shorter",
            ),
            ("a sha256:abc\n".to_string(), "line 1: sha256: takes 64"),
            (
                format!("a\u{1b}[2J {A}\n"),
                "line 1: the first field cannot be",
            ),
            // The fields swapped: the token is where the name belongs.
            (
                format!("{A} alice\n"),
                "line 1: the second field, the token, is shorter",
            ),
            (
                format!("{}x {A}\n", "y".repeat(200)),
                "line 1: the first field cannot be",
            ),
        ] {
            let e = parse_tokens(&text).expect_err(&text);
            assert!(e.starts_with(wanted), "{e}");
            assert!(!e.contains(A) && !e.contains("tiny"), "{e}");
        }
    }

    #[test]
    fn the_single_token_is_its_own_principal() {
        let mut tokens = parse_tokens(&format!("alice {A}\n")).unwrap();
        tokens.add_single(B).unwrap();
        assert_eq!(
            tokens.principal(B).map(Principal::name),
            Some(SINGLE_TOKEN_NAME)
        );
        let mut again = parse_tokens(&format!("alice {A}\n")).unwrap();
        let e = again.add_single(A).expect_err("the same token twice");
        assert!(!e.contains(A), "{e}");
    }

    #[test]
    fn a_header_without_a_bearer_token_is_missing() {
        let auth = Auth {
            tokens: parse_tokens(&format!("alice {A}\n")).unwrap(),
            ..Auth::default()
        };
        assert_eq!(auth.principal(None), Err(Refusal::Missing));
        assert_eq!(auth.principal(Some("Basic x")), Err(Refusal::Missing));
        assert!(matches!(
            auth.principal(Some("Bearer nope")),
            Err(Refusal::Invalid(_))
        ));
        for scheme in ["Bearer", "bearer"] {
            assert_eq!(
                auth.principal(Some(&format!("{scheme} {A}"))).map(|p| p.0),
                Ok(Arc::from("alice"))
            );
        }
    }

    #[test]
    fn a_url_splits_into_base_and_path() {
        assert_eq!(
            split_url("https://h.example:8443/mcp"),
            ("https://h.example:8443", "/mcp")
        );
        assert_eq!(split_url("https://h.example"), ("https://h.example", ""));
    }

    use crate::test_keys as keys;

    fn jwt(jwks: &serde_json::Value) -> (Jwt, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let jwt = Jwt::load(&JwtOptions {
            jwks: path,
            issuer: keys::ISSUER.into(),
            resource: keys::RESOURCE.into(),
            audience: None,
        })
        .expect("the JWKS loads");
        (jwt, dir)
    }

    #[test]
    fn a_jwt_of_each_key_type_names_its_sub() {
        let k = keys::make();
        let (jwt, _dir) = jwt(&k.jwks);
        for (key, alg, kid) in [
            (&k.rsa, Algorithm::RS256, "test-rsa"),
            (&k.ed, Algorithm::EdDSA, "test-ed"),
            (&k.ec, Algorithm::ES256, "test-ec"),
        ] {
            let token = keys::sign(key, alg, kid, &keys::claims("carol"));
            assert_eq!(
                jwt.principal(&token).map(|p| p.0),
                Ok(Arc::from("carol")),
                "{kid}"
            );
        }
    }

    #[test]
    fn a_jwt_that_does_not_hold_is_refused_with_why() {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let k = keys::make();
        let (jwt, _dir) = jwt(&k.jwks);
        let with = |f: &dyn Fn(&mut Value)| {
            let mut c = keys::claims("carol");
            f(&mut c);
            keys::sign(&k.ed, Algorithm::EdDSA, "test-ed", &c)
        };
        let good = with(&|_| {});
        // A signature with one byte changed in its middle.
        let mut tampered: Vec<char> = good.chars().collect();
        let i = good.rfind('.').unwrap() + 10;
        tampered[i] = if tampered[i] == 'A' { 'B' } else { 'A' };
        let tampered: String = tampered.into_iter().collect();
        let payload = good.split('.').nth(1).unwrap();
        // HS256 keyed with the RSA key's public modulus: the classic
        // confusion of a verifier that trusts the header's `alg`.
        let n = k.jwks["keys"][0]["n"].as_str().unwrap();
        let confused = keys::sign(
            &jsonwebtoken::EncodingKey::from_secret(n.as_bytes()),
            Algorithm::HS256,
            "test-rsa",
            &keys::claims("carol"),
        );
        for (token, why) in [
            (
                with(&|c| c["exp"] = keys::at(-3600).into()),
                "it has expired",
            ),
            (
                with(&|c| c["aud"] = "https://other.example.test/mcp".into()),
                "it is for another audience (resource)",
            ),
            (
                with(&|c| c["iss"] = "https://evil.example.test".into()),
                "it is from another issuer",
            ),
            (
                format!("{}.{payload}.", b64(r#"{"alg":"none","typ":"JWT"}"#)),
                "it is not a signed JWT",
            ),
            (
                keys::sign(&k.ed, Algorithm::EdDSA, "nobody", &keys::claims("carol")),
                "it is signed with a key the server does not know",
            ),
            (tampered, "its signature does not verify"),
            (confused, "it names an algorithm its key does not take"),
            (
                with(&|c| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
                CLAIMS,
            ),
            (
                with(&|c| c["sub"] = "\u{1b}[2J".into()),
                "its sub cannot be a principal's name",
            ),
        ] {
            assert_eq!(jwt.principal(&token), Err(why));
        }
    }

    #[test]
    fn a_verified_jwt_is_remembered_until_it_expires() {
        let k = keys::make();
        let (jwt, _dir) = jwt(&k.jwks);
        let token = keys::sign(&k.ec, Algorithm::ES256, "test-ec", &keys::claims("dave"));
        assert_eq!(jwt.principal(&token).map(|p| p.0), Ok(Arc::from("dave")));
        assert_eq!(jwt.verified.lock().unwrap().len(), 1);
        assert_eq!(jwt.principal(&token).map(|p| p.0), Ok(Arc::from("dave")));
        // One that expired while remembered is checked again, and refused.
        let hash = sha256(token.as_bytes());
        if let Some(v) = jwt.verified.lock().unwrap().get_mut(&hash) {
            v.exp = keys::at(-3600);
        }
        assert_eq!(
            jwt.verify(&token).map(|(p, _)| p.0),
            Ok(Arc::from("dave")),
            "the token itself is still good"
        );
        let expired = keys::sign(
            &k.ec,
            Algorithm::ES256,
            "test-ec",
            &json!({"sub": "dave", "iss": keys::ISSUER, "aud": keys::RESOURCE, "exp": keys::at(-3600)}),
        );
        assert_eq!(jwt.principal(&expired), Err("it has expired"));
        assert!(
            jwt.verified
                .lock()
                .unwrap()
                .get(&hash)
                .is_some_and(|v| v.exp < keys::at(0))
        );
        assert_eq!(jwt.principal(&token).map(|p| p.0), Ok(Arc::from("dave")));
        assert!(
            jwt.verified
                .lock()
                .unwrap()
                .get(&hash)
                .is_some_and(|v| v.exp > keys::at(0)),
            "checked again and remembered anew"
        );
    }

    #[test]
    fn a_jwks_that_cannot_be_used_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let options = |name: &str| JwtOptions {
            jwks: dir.path().join(name),
            issuer: keys::ISSUER.into(),
            resource: keys::RESOURCE.into(),
            audience: None,
        };
        let load = |name: &str, text: Option<&str>| {
            if let Some(t) = text {
                std::fs::write(dir.path().join(name), t).unwrap();
            }
            Jwt::load(&options(name)).err().expect("refused")
        };
        for (name, text, wanted) in [
            ("missing.json", None, "cannot read the JWKS file"),
            (
                "bad.json",
                Some("{\"keys\": 7}"),
                "is not a JSON Web Key Set",
            ),
            ("empty.json", Some("{\"keys\": []}"), "holds no key"),
            (
                "oct.json",
                Some(r#"{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}"#),
                "a symmetric (oct) key",
            ),
        ] {
            let e = load(name, text);
            assert!(
                e.contains(&dir.path().join(name).display().to_string()) && e.contains(wanted),
                "{e}"
            );
        }
    }

    #[test]
    fn the_metadata_names_the_resource_and_its_issuer() {
        let k = keys::make();
        let (jwt, _dir) = jwt(&k.jwks);
        let auth = Auth {
            jwt: Some(jwt),
            issuer: keys::ISSUER.into(),
            ..Auth::default()
        };
        assert_eq!(
            auth.metadata_url().as_deref(),
            Some("https://mcp.example.test/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            auth.metadata_paths(),
            [WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/mcp")]
        );
        let m = auth.jwt.as_ref().unwrap().metadata(&auth.issuer);
        assert_eq!(m["resource"], keys::RESOURCE);
        assert_eq!(m["authorization_servers"], json!([keys::ISSUER]));
    }
}
