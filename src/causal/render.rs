//! Printing the causal report: the JSON renderer and the terminal renderer of
//! [`crate::report`], taught the causal report too.

use std::io::Write;

use super::report::{layer_mean, rank_map, CausalMethod, CausalReport, Ranking};
use crate::report::{terminal_text, Json, Terminal};

/// A way of printing a causal report.
pub trait CausalRenderer {
    fn render_causal(&self, report: &CausalReport, out: &mut dyn Write) -> std::io::Result<()>;
}

impl CausalRenderer for Json {
    fn render_causal(&self, report: &CausalReport, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, report)?;
        writeln!(out)
    }
}

impl CausalRenderer for Terminal {
    /// The generation, then each generated token's top prompt tokens; with `all_layers`,
    /// also the generated × prompt map of the ranked method.
    fn render_causal(&self, report: &CausalReport, out: &mut dyn Write) -> std::io::Result<()> {
        let info = &report.generation;
        let strategy = match (info.seed, info.temperature) {
            (Some(seed), Some(t)) => format!("sampled with seed {seed}, temperature {t}"),
            _ => "greedy".to_string(),
        };
        writeln!(
            out,
            "{} on {}: {} layers × {} heads, {} prompt tokens, {} generated ({strategy}{})",
            terminal_text(&report.model),
            report.device,
            report.layers,
            report.heads,
            report.prompt_tokens.len(),
            report.generated_tokens.len(),
            if info.stopped_at_eos {
                ", stopped at end of text"
            } else {
                ""
            },
        )?;
        writeln!(out)?;
        writeln!(out, "Prompt:    {}", terminal_text(&report.prompt))?;
        writeln!(out, "Generated: {}", terminal_text(&report.generated_text))?;
        writeln!(out)?;
        let ranking = &report.ranking;
        write_ranking(report, ranking, out)?;
        // Each --mixing method ranked the same way, by its rollout.
        let keep = ranking.top.iter().map(Vec::len).max().unwrap_or(0);
        for (name, maps) in report.methods.iter().flatten() {
            let map = layer_mean(&maps.rollout);
            let method = format!("{name} rollout");
            let tokens = &report.prompt_tokens;
            writeln!(out)?;
            let ranked = rank_map(&map, &method, tokens, keep, ranking.skip_common);
            write_ranking(report, &ranked, out)?;
        }
        if self.all_layers {
            if let Some(method) = CausalMethod::from_name(&ranking.method) {
                write_map(report, method, out)?;
            }
        }
        Ok(())
    }
}

/// Each generated token's top prompt tokens by `ranking`.
fn write_ranking(
    report: &CausalReport,
    ranking: &Ranking,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "Top prompt tokens for each generated token ({}, mean over layers{})",
        ranking.method.replace('_', " "),
        if ranking.skip_common {
            ", common words skipped"
        } else {
            ""
        },
    )?;
    let width = column_width(&report.generated_tokens);
    for (k, (token, top)) in report.generated_tokens.iter().zip(&ranking.top).enumerate() {
        let picks: Vec<String> = top
            .iter()
            .map(|t| format!("{}@{} {:.3}", quoted(&t.token), t.index, t.score))
            .collect();
        let shown = quoted(token);
        writeln!(out, "  {k:>3}  {shown:<width$}  ← {}", picks.join("  "))?;
    }
    Ok(())
}

/// The generated × prompt table of `method`, layer means.
fn write_map(
    report: &CausalReport,
    method: CausalMethod,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(map) = report.relevance.token_map(method) else {
        return Ok(());
    };
    writeln!(out)?;
    writeln!(
        out,
        "{} (rows: generated tokens, columns: prompt tokens)",
        method.name()
    )?;
    let width = column_width(&report.generated_tokens);
    let cells: Vec<String> = report
        .prompt_tokens
        .iter()
        .map(|t| format!("{t:?}"))
        .collect();
    let cell = cells
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let header: String = cells.iter().map(|c| format!(" {c:>cell$}")).collect();
    writeln!(out, "  {:>3}  {:<width$} {header}", "#", "token")?;
    for (k, (token, row)) in report.generated_tokens.iter().zip(&map).enumerate() {
        let values: String = row.iter().map(|v| format!(" {v:>cell$.4}")).collect();
        writeln!(out, "  {k:>3}  {:<width$} {values}", quoted(token))?;
    }
    Ok(())
}

fn column_width(tokens: &[String]) -> usize {
    tokens
        .iter()
        .map(|t| quoted(t).chars().count())
        .max()
        .unwrap_or(0)
        .max(5)
}

/// A token in quotes, escaped so that it cannot act on the terminal.
fn quoted(token: &str) -> String {
    terminal_text(&format!("{token:?}"))
}
