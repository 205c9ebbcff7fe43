//! TLS for PostgreSQL connections with rustls (no system library), as
//! libpq's `sslmode` asks: `prefer` and `require` encrypt without checking
//! the certificate, `verify-ca` checks that a trusted root signed it,
//! `verify-full` also that it names the host. The trusted roots are the
//! file `sslrootcert` names (PEM), else the Mozilla roots built in. A
//! client certificate (`sslcert`, `sslkey`) is offered in every mode, for a
//! server whose `pg_hba.conf` asks for one (`cert`, `clientcert=...`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::SslMode;

/// What a mode checks of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Nothing (the handshake's signatures only): encryption against a
    /// passive listener, as libpq's `prefer` and `require`.
    Nothing,
    /// Signed by a trusted root, whatever host it names.
    Chain,
    /// Signed by a trusted root, for the host connected to.
    ChainAndName,
}

/// The table of modes: what each one checks.
const MODES: [(SslMode, Check); 5] = [
    (SslMode::Disable, Check::Nothing),
    (SslMode::Prefer, Check::Nothing),
    (SslMode::Require, Check::Nothing),
    (SslMode::VerifyCa, Check::Chain),
    (SslMode::VerifyFull, Check::ChainAndName),
];

fn check_of(mode: SslMode) -> Check {
    MODES
        .iter()
        .find(|(m, _)| *m == mode)
        .map_or(Check::ChainAndName, |(_, c)| *c)
}

/// The connector for `mode`; `Err` says which file could not be used.
pub fn connector(
    mode: SslMode,
    root_cert: Option<&Path>,
    client_cert: Option<(&Path, &Path)>,
) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let check = check_of(mode);
    let webpki = match check {
        Check::Nothing => None,
        Check::Chain | Check::ChainAndName => Some(
            WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(root_cert)?),
                Arc::clone(&provider),
            )
            .build()
            .map_err(|e| format!("TLS: {e}"))?,
        ),
    };
    let verifier = Verifier {
        check,
        webpki,
        algorithms: provider.signature_verification_algorithms,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let config = match client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let (chain, key) = client_identity(cert, key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("sslcert {}: {e}", cert.display()))?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Whether a failure to connect was a TLS refusal (a certificate not
/// trusted, a handshake refused): trying again cannot help.
pub fn refused(e: &postgres::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        source = cause.source();
    }
    false
}

fn roots(file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match file {
        None => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let bad = |e: &dyn fmt::Display| format!("sslrootcert {}: {e}", path.display());
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                store.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            if store.is_empty() {
                return Err(bad(&"no certificate in the file"));
            }
        }
    }
    Ok(store)
}

/// The client's certificate chain and key, from PEM files.
fn client_identity(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let bad_cert = |e: &dyn fmt::Display| format!("sslcert {}: {e}", cert.display());
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad_cert(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_cert(&e))?;
    if chain.is_empty() {
        return Err(bad_cert(&"no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "sslkey {}: {e} (a PEM private key, not encrypted)",
            key.display()
        )
    })?;
    Ok((chain, key))
}

/// The server's certificate checked as the mode says; the handshake's
/// signatures always.
struct Verifier {
    check: Check,
    /// The roots' verifier, for the modes that check the chain.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Verifier({:?})", self.check)
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_row_and_only_the_verify_modes_check() {
        for (mode, check) in MODES {
            assert_eq!(MODES.iter().filter(|(m, _)| *m == mode).count(), 1);
            assert_eq!(
                check != Check::Nothing,
                matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn unreadable_tls_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let missing = dir.path().join("missing.pem");
        let e = connector(SslMode::VerifyFull, Some(&empty), None).err();
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("sslrootcert") && e.contains("empty.pem")),
            "{e:?}"
        );
        let e = connector(SslMode::Require, None, Some((&missing, &empty))).err();
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("sslcert") && e.contains("missing.pem")),
            "{e:?}"
        );
        let cert = rcgen::generate_simple_self_signed(vec!["client".to_string()]).expect("cert");
        let cert_file = dir.path().join("client.crt");
        std::fs::write(&cert_file, cert.cert.pem()).expect("write");
        let e = connector(SslMode::Require, None, Some((&cert_file, &empty))).err();
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("sslkey") && e.contains("empty.pem")),
            "{e:?}"
        );
        let key_file = dir.path().join("client.key");
        std::fs::write(&key_file, cert.signing_key.serialize_pem()).expect("write");
        assert!(connector(SslMode::Require, None, Some((&cert_file, &key_file))).is_ok());
    }
}
