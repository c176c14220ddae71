//! A generated text's report: the generation, every method's `[g][m][L]` maps and the top
//! prompt tokens of each generated token; [`GeneratedView`] is the report as shown.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::faithfulness::correlations::Evaluation;
use crate::faithfulness::Importance;
use crate::methods::CausalMixings;
use crate::relevance::causal::{CausalMethod, CausalRelevance};

/// Everything bert-explain found for one prompt and its continuation; serialises to the
/// causal JSON report (`"mode": "causal"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CausalReport {
    pub mode: String,
    pub model: String,
    /// The family's `model_type` ("gpt2", "llama", "qwen2", "mistral"; SPEC §7, additive).
    #[serde(default)]
    pub family: String,
    /// Always "causal-lm" (SPEC §7, additive).
    #[serde(default)]
    pub task: String,
    pub device: String,
    pub prompt: String,
    /// The m prompt tokens, each as its own text (e.g. `" book"`).
    pub prompt_tokens: Vec<String>,
    pub prompt_ids: Vec<u32>,
    /// The g generated tokens (g ≤ the number asked for: generation stops at end-of-text).
    pub generated_tokens: Vec<String>,
    pub generated_ids: Vec<u32>,
    pub generated_text: String,
    pub generation: GenerationInfo,
    pub layers: usize,
    pub heads: usize,
    pub fusion: String,
    pub residual: f64,
    /// Every method as `[g][m][L]`.
    pub relevance: CausalRelevance,
    /// With `--mixing`: each method of SPEC §8 by name, its maps `[g][m][L]` (additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<CausalMixings>,
    pub ranking: Ranking,
    /// With `--evaluate` or `--lrp`: each generated token's importance scores, over the
    /// tokens fed at its step (the prompt and the tokens generated before it; additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<Vec<Importance>>,
    /// With them: each generated token's correlations of its maps with its scores over the
    /// prompt, and with `--evaluate` ERASER (additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Vec<Evaluation>>,
}

/// A generated text's report as shown: the generated token whose layer × prompt map the
/// figure draws and the HTML page opens on. Its JSON is the report's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct GeneratedView {
    pub report: CausalReport,
    #[serde(skip)]
    pub token: usize,
}

impl GeneratedView {
    /// Shown at generated token `token` (`None`: the last); an error where `token` is past
    /// the tokens asked for, or past those generated before the end-of-text token.
    pub fn new(report: CausalReport, token: Option<usize>) -> Result<Self> {
        let generated = report.generated_tokens.len();
        let token = token.unwrap_or(generated.saturating_sub(1));
        let generate = report.generation.requested;
        if token >= generate {
            return Err(Error::FigureTokenOutOfRange { token, generate });
        }
        if token >= generated {
            return Err(Error::FigureTokenPastEnd { token, generated });
        }
        Ok(Self { report, token })
    }

    /// Shown at the last generated token.
    pub fn last(report: CausalReport) -> Self {
        let token = report.generated_tokens.len().saturating_sub(1);
        Self { report, token }
    }
}

/// How the tokens were generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationInfo {
    /// `"greedy"` or `"sample"`.
    pub strategy: String,
    /// With sampling: the seed that reproduces the tokens.
    pub seed: Option<u64>,
    pub temperature: Option<f64>,
    pub requested: usize,
    pub stopped_at_eos: bool,
}

/// The top prompt tokens of each generated token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// The method ranked: "rollout_corrected", "rollout", "flow" or "raw".
    pub method: String,
    /// Whether common words and punctuation were left out.
    pub skip_common: bool,
    /// `[g][≤ K]`, best first; scores are means over layers.
    pub top: Vec<Vec<RankedToken>>,
}

/// One prompt token in a ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedToken {
    pub index: usize,
    pub token: String,
    pub score: f64,
}

/// Ranks the prompt tokens for every generated token by the layer mean of `method`, best
/// first, keeping `k`; with `skip_common`, common words and punctuation are left out.
pub fn rank(
    relevance: &CausalRelevance,
    method: CausalMethod,
    prompt_tokens: &[String],
    k: usize,
    skip_common: bool,
) -> Ranking {
    let map = relevance.token_map(method).unwrap_or_default();
    rank_map(&map, method.name(), prompt_tokens, k, skip_common)
}

/// Ranks the prompt tokens for every generated token by `map` (`[g][m]`), best first,
/// keeping `k`; the ranking is named `method`.
pub fn rank_map(
    map: &[Vec<f64>],
    method: &str,
    prompt_tokens: &[String],
    k: usize,
    skip_common: bool,
) -> Ranking {
    let top = map
        .iter()
        .map(|scores| {
            let mut order: Vec<usize> = (0..scores.len())
                .filter(|&j| !(skip_common && is_common(&prompt_tokens[j])))
                .collect();
            order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
            order
                .into_iter()
                .take(k)
                .map(|j| RankedToken {
                    index: j,
                    token: prompt_tokens[j].clone(),
                    score: scores[j],
                })
                .collect()
        })
        .collect();
    Ranking {
        method: method.to_string(),
        skip_common,
        top,
    }
}

/// English function words that carry little content of their own.
const COMMON_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he",
    "her", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me",
    "my", "no", "not", "of", "on", "or", "our", "she", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "up", "us", "was",
    "we", "were", "what", "when", "which", "who", "will", "with", "would", "you", "your", "'s",
    "s", "t", "'t", "'re", "'ve", "'ll", "'d", "'m",
];

/// Whether a token (as its text, e.g. `" the"`) is blank, only punctuation, or a common word.
pub fn is_common(token: &str) -> bool {
    let word = token.trim().to_lowercase();
    word.chars().all(|c| !c.is_alphanumeric()) || COMMON_WORDS.contains(&word.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relevance::causal::tests::relevance;

    #[test]
    fn ranking_can_skip_common_words_and_punctuation() {
        let tokens: Vec<String> = [" the", " Sara", "."].map(String::from).into();
        let all = rank(&relevance(), CausalMethod::Rollout, &tokens, 2, false);
        let picked: Vec<usize> = all.top[0].iter().map(|t| t.index).collect();
        assert_eq!(picked, [2, 1]);
        let content = rank(&relevance(), CausalMethod::Rollout, &tokens, 2, true);
        assert_eq!(content.top[0].len(), 1);
        assert_eq!(content.top[0][0].token, " Sara");
        assert!(is_common(" The") && !is_common(" Sara") && is_common(" ,") && is_common(" "));
    }

    /// A report of `generated` tokens out of `requested`, with no maps.
    fn report(requested: usize, generated: usize) -> CausalReport {
        CausalReport {
            mode: "causal".into(),
            model: "m".into(),
            family: "gpt2".into(),
            task: "causal-lm".into(),
            device: "cpu".into(),
            prompt: "p".into(),
            prompt_tokens: vec!["p".into()],
            prompt_ids: vec![0],
            generated_tokens: vec!["x".into(); generated],
            generated_ids: vec![1; generated],
            generated_text: "x".repeat(generated),
            generation: GenerationInfo {
                strategy: "greedy".into(),
                seed: None,
                temperature: None,
                requested,
                stopped_at_eos: generated < requested,
            },
            layers: 1,
            heads: 1,
            fusion: "mean".into(),
            residual: 0.5,
            relevance: relevance(),
            methods: None,
            ranking: rank(&relevance(), CausalMethod::Rollout, &[], 0, false),
            importance: None,
            evaluation: None,
        }
    }

    #[test]
    fn a_view_is_shown_at_a_generated_token() {
        assert_eq!(GeneratedView::new(report(4, 4), None).unwrap().token, 3);
        assert_eq!(GeneratedView::new(report(4, 2), Some(1)).unwrap().token, 1);
        assert_eq!(GeneratedView::last(report(4, 2)).token, 1);
        // Past the tokens asked for: the command line's mistake (exit status 2).
        let asked = GeneratedView::new(report(4, 4), Some(4)).unwrap_err();
        assert!(matches!(
            asked,
            Error::FigureTokenOutOfRange {
                token: 4,
                generate: 4
            }
        ));
        assert!(asked.is_usage());
        // Asked for, but generation stopped at the end of text before it.
        let stopped = GeneratedView::new(report(4, 2), Some(3)).unwrap_err();
        assert!(matches!(
            stopped,
            Error::FigureTokenPastEnd {
                token: 3,
                generated: 2
            }
        ));
        assert!(stopped.to_string().contains("after 2 tokens (0 to 1)"));
    }
}
