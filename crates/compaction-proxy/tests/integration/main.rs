//! compaction-proxy's integration tests: one binary, a module a concern. Every test starts the
//! proxy and a local upstream on 127.0.0.1 (nothing leaves the machine) and runs within a time
//! limit.

mod bodies;
mod compaction;
mod passthrough;
mod upstream;
mod windows;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use compaction_proxy::ProxySettings;

/// A proxy serving on a loopback port, stopped when dropped; its log lines are kept.
#[derive(Debug)]
pub struct Proxy {
    pub address: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<Result<(), compaction_proxy::Error>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    pub async fn start(settings: ProxySettings) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("an address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let settings =
            settings.with_log(move |line| lines.lock().expect("not poisoned").push(line.to_owned()));
        let task = tokio::spawn(compaction_proxy::serve(listener, settings));
        Proxy { address, log, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("not poisoned").clone()
    }
}

/// A client of the proxy, with no connection pool (each test's requests stand alone).
pub fn client() -> reqwest::Client {
    client_builder().build().expect("a client")
}

/// The client's builder, with a TLS provider (reqwest is built without one), never used: every
/// test talks plain HTTP on loopback.
pub fn client_builder() -> reqwest::ClientBuilder {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
}

/// Runs `test` on a runtime of its own, failing it past 30 seconds.
pub fn bounded<F: Future<Output = ()>>(test: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), test).await.expect("the test ran within 30 s");
        });
}
