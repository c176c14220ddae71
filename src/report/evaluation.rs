//! The `--evaluate` part of the terminal report: each token's importance scores, and how
//! well each method's relevance correlates with them, layer by layer.

use std::io::Write;

use super::{probability, Report};
use crate::faithfulness::{headline_scores, score, scores, Score};

/// How many patches of an image each score brings into the terminal's table: its largest in
/// absolute value.
const PATCHES_SHOWN: usize = 5;

/// The rows of the importance table: every token of a text; an image's leading tokens and
/// each score's [`PATCHES_SHOWN`] largest patches, in order.
fn shown_rows(report: &Report, columns: &[(&Score, &[f64])]) -> Vec<usize> {
    let n = report.tokens.len();
    let Some(image) = &report.image else {
        return (0..n).collect();
    };
    let lead = n.saturating_sub(image.grid[0] * image.grid[1]);
    let mut shown = vec![false; n];
    shown[..lead].fill(true);
    for (_, values) in columns {
        let mut patches: Vec<usize> = (lead..n).collect();
        patches.sort_by(|&a, &b| values[b].abs().total_cmp(&values[a].abs()));
        for &j in patches.iter().take(PATCHES_SHOWN) {
            shown[j] = true;
        }
    }
    (0..n).filter(|&j| shown[j]).collect()
}

/// Writes nothing unless the report has importance scores.
pub fn write_evaluation(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let (Some(importance), Some(evaluation)) = (&report.importance, &report.evaluation) else {
        return Ok(());
    };
    writeln!(out)?;
    let blank = match (importance.score("blank_out"), &report.image) {
        (None, _) => String::new(),
        (Some(_), None) => format!(" (blank-out puts {} in its place)", importance.blank_token),
        (Some(_), Some(_)) => format!(
            " (blank-out makes it a patch of the {})",
            importance.blank_token
        ),
    };
    writeln!(
        out,
        "Importance of each token for p({}) = {}{blank}",
        importance.word,
        probability(importance.probability),
    )?;
    let width = report
        .tokens
        .iter()
        .map(|t| t.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 16);
    // The headline scores the report has, in report order.
    let columns: Vec<(&Score, &[f64])> = headline_scores()
        .filter_map(|s| Some((s, importance.score(s.name)?)))
        .collect();
    write!(out, "  {:>3}  {:<width$}", "#", "token")?;
    for (score, _) in &columns {
        write!(out, "  {:>10}", score.label)?;
    }
    writeln!(out)?;
    let shown = shown_rows(report, &columns);
    for &j in &shown {
        let token = &report.tokens[j];
        write!(out, "  {j:>3}  {token:<width$}")?;
        for (score, values) in &columns {
            match score.signed {
                true => write!(out, "  {:>+10.4}", values[j])?,
                false => write!(out, "  {:>10.4}", values[j])?,
            }
        }
        writeln!(out)?;
    }
    let hidden = report.tokens.len() - shown.len();
    if hidden > 0 {
        writeln!(
            out,
            "  {hidden} more patches, each outside every score's {PATCHES_SHOWN} largest in size (--json has them all)"
        )?;
    }
    if let Some(check) = &importance.integrated_gradients_check {
        let verdict = match check.holds() {
            true => "within 1%".to_string(),
            false => format!(
                "{:.1}% off; more --ig-steps bring them closer",
                100.0 * check.delta.abs() / check.difference.abs().max(f64::MIN_POSITIVE)
            ),
        };
        writeln!(
            out,
            "  Integrated gradients ({} steps) sum to {:+.4}, p − p(baseline) = {:+.4}: {verdict}",
            check.steps, check.sum, check.difference
        )?;
    }
    if let Some(check) = &importance.lrp_check {
        let sums: Vec<String> = (check.sum.iter())
            .map(|(name, sum)| {
                let label = score(name).map_or(name.as_str(), |s| s.label);
                format!("{label} {sum:+.4}")
            })
            .collect();
        writeln!(
            out,
            "  LRP's relevances sum to {} of the logit {:+.4} (the rest went to the biases)",
            sums.join(", "),
            check.logit
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Spearman correlation of relevance with importance, by layer"
    )?;
    let entries = evaluation.entries();
    let map_width = entries
        .iter()
        .map(|(_, m, _)| m.len())
        .max()
        .unwrap_or(6)
        .max(6);
    write!(out, "  {:<18} {:<map_width$}", "importance", "map")?;
    for l in 1..=report.layers {
        write!(out, " {:>7}", format!("L{l}"))?;
    }
    writeln!(out)?;
    for (score, method, layers) in entries {
        write!(out, "  {score:<18} {method:<map_width$}")?;
        for value in layers {
            match value {
                Some(rho) => write!(out, " {rho:>+7.3}")?,
                None => write!(out, " {:>7}", "n/a")?,
            }
        }
        writeln!(out)?;
    }
    if let Some(eraser) = &evaluation.eraser {
        writeln!(out)?;
        writeln!(
            out,
            "ERASER AOPC of the last layer's maps (comprehensiveness: higher is better; sufficiency: lower is better)"
        )?;
        writeln!(
            out,
            "  {:<16} {:>15} {:>15} {:>15} {:>15}",
            "method", "rollout comp.", "rollout suff.", "flow comp.", "flow suff."
        )?;
        for (name, e) in eraser {
            write!(
                out,
                "  {name:<16} {:>+15.4} {:>+15.4}",
                e.rollout.comprehensiveness, e.rollout.sufficiency
            )?;
            match e.flow {
                Some(flow) => writeln!(
                    out,
                    " {:>+15.4} {:>+15.4}",
                    flow.comprehensiveness, flow.sufficiency
                )?,
                None => writeln!(out, " {:>15} {:>15}", "no flow", "no flow")?,
            }
        }
    }
    if let Some(by_score) = &evaluation.eraser_importance {
        writeln!(out)?;
        writeln!(out, "ERASER AOPC of each importance score's ranking")?;
        writeln!(out, "  {:<30} {:>15} {:>15}", "score", "comp.", "suff.")?;
        for score in scores().filter(|s| by_score.contains_key(s.name)) {
            let aopc = by_score[score.name];
            writeln!(
                out,
                "  {:<30} {:>+15.4} {:>+15.4}",
                score.name, aopc.comprehensiveness, aopc.sufficiency
            )?;
        }
    }
    Ok(())
}
