//! Clients named on the command line: `--counter openai:MODEL`, `--provider anthropic --model NAME`.

use crate::error::Error;
use crate::generator::{AnthropicChatGenerator, OpenAIChatGenerator, ProviderChatGenerator};
use crate::provider::Provider;
use crate::settings::ClientSettings;

/// Reads `PROVIDER:MODEL` (`openai:gpt-4o`, `anthropic:claude-sonnet-4-5`). The model is
/// everything after the first colon, so `openai:llama3:8b` names the model `llama3:8b`.
///
/// ```
/// use compaction_llm::{parse_provider_spec, Provider};
///
/// assert_eq!(parse_provider_spec("openai:llama3:8b")?, (Provider::OpenAI, "llama3:8b".to_owned()));
/// assert!(parse_provider_spec("openai").is_err());
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidSpec`] without a colon or a model, [`Error::UnknownProvider`].
pub fn parse_provider_spec(spec: &str) -> Result<(Provider, String), Error> {
    let invalid = |reason: &str| Error::InvalidSpec { spec: spec.to_owned(), reason: reason.to_owned() };
    let (provider, model) =
        spec.split_once(':').ok_or_else(|| invalid("expected PROVIDER:MODEL, such as openai:gpt-4o"))?;
    let provider: Provider = provider.parse()?;
    if model.trim().is_empty() {
        return Err(invalid("the model is missing after the colon"));
    }
    Ok((provider, model.to_owned()))
}

/// A provider token counter from `PROVIDER:MODEL`, with the key from `settings` or the
/// provider's environment variable.
///
/// ```
/// use compaction_llm::{counter_from_provider_spec, ClientSettings};
///
/// let settings = ClientSettings::default().with_api_key("sk-test").with_base_url("http://127.0.0.1:9/v1");
/// let counter = counter_from_provider_spec("openai:gpt-4o", settings)?;
/// assert_eq!(counter.describe(), "openai:gpt-4o");
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// As [`parse_provider_spec`], and [`Error::MissingApiKey`] naming the variable to set.
#[cfg(feature = "blocking")]
pub fn counter_from_provider_spec(
    spec: &str,
    settings: ClientSettings,
) -> Result<Box<dyn compaction_tokens::TokenCounter>, Error> {
    let (provider, model) = parse_provider_spec(spec)?;
    Ok(match provider {
        Provider::OpenAI => Box::new(crate::counter::OpenAITokenCounter::new(model, settings)?),
        Provider::Anthropic => Box::new(crate::counter::AnthropicTokenCounter::new(model, settings)?),
    })
}

/// A chat generator for `provider` (`openai` or `anthropic`) and `model`; the base URL and key
/// from `settings`, else from the environment.
///
/// ```
/// use compaction_llm::{generator_from_provider, ClientSettings, Error};
///
/// let settings = ClientSettings::default().with_base_url("http://127.0.0.1:8080/v1").with_api_key("local");
/// let generator = generator_from_provider("openai", "qwen2.5", settings)?;
/// assert_eq!(generator.model(), "qwen2.5");
///
/// // Without a key in the settings or the environment, the error names the variable.
/// # std::env::remove_var("ANTHROPIC_API_KEY");
/// let error = generator_from_provider("anthropic", "claude-haiku-4-5", ClientSettings::default()).unwrap_err();
/// assert!(matches!(error, Error::MissingApiKey { variable: "ANTHROPIC_API_KEY", .. }));
/// # Ok::<(), compaction_llm::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::UnknownProvider`], [`Error::InvalidSpec`] for an empty model, [`Error::MissingApiKey`],
/// [`Error::InvalidBaseUrl`].
pub fn generator_from_provider(
    provider: &str,
    model: &str,
    settings: ClientSettings,
) -> Result<ProviderChatGenerator, Error> {
    let parsed: Provider = provider.parse()?;
    if model.trim().is_empty() {
        return Err(Error::InvalidSpec {
            spec: format!("{provider}:{model}"),
            reason: "the model is empty".into(),
        });
    }
    Ok(match parsed {
        Provider::OpenAI => ProviderChatGenerator::OpenAI(OpenAIChatGenerator::new(model, settings)?),
        Provider::Anthropic => {
            ProviderChatGenerator::Anthropic(AnthropicChatGenerator::new(model, settings)?)
        }
    })
}
