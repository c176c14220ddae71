//! An image's maps as a person reads them (SPEC §10): the tokens before the patches ([CLS],
//! [DIST], registers) apart, the patches as their grid, and the patches that matter most.
//! What the terminal, the figure and the page draw of an image report.

use super::View;

/// One map over an image's tokens, split.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchMap<'a> {
    /// The shown tokens before the patches, with their values.
    pub leading: Vec<(&'a str, f64)>,
    /// `[rows][cols]`: each patch's value.
    pub grid: Vec<Vec<f64>>,
}

impl PatchMap<'_> {
    /// The largest patch value (0 for none).
    pub fn max(&self) -> f64 {
        self.grid.iter().flatten().copied().fold(0.0, f64::max)
    }

    /// The sum over the patches.
    pub fn patch_total(&self) -> f64 {
        self.grid.iter().flatten().sum()
    }

    /// The `k` largest patches, largest first (ties: first in reading order), as (row,
    /// column, value).
    pub fn top(&self, k: usize) -> Vec<(usize, usize, f64)> {
        let mut all: Vec<(usize, usize, f64)> = (self.grid.iter().enumerate())
            .flat_map(|(r, row)| row.iter().enumerate().map(move |(c, &v)| (r, c, v)))
            .collect();
        all.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
        all.truncate(k);
        all
    }
}

/// `row` (one layer's map over the view's tokens) split into the leading tokens and the
/// grid; `None` when the report is not an image's.
pub fn patch_map<'a>(view: &'a View, row: &[f64]) -> Option<PatchMap<'a>> {
    let image = view.report.image.as_ref()?;
    let [rows, cols] = image.grid;
    let total = view.positions.len() + view.hidden.as_ref().map_or(0, Vec::len);
    let lead = total.checked_sub(rows * cols)?;
    let mut grid = vec![vec![0.0; cols]; rows];
    let mut leading = Vec::new();
    for (j, (&position, &value)) in view.positions.iter().zip(row).enumerate() {
        match position.checked_sub(lead) {
            Some(k) => grid[k / cols][k % cols] = value,
            None => leading.push((view.report.tokens[j].as_str(), value)),
        }
    }
    Some(PatchMap { leading, grid })
}

/// A patch's name as the report spells it.
pub fn patch_name(row: usize, col: usize) -> String {
    format!("patch r{row} c{col}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ImageInfo, Report, Target};

    fn report() -> Report {
        let tokens: Vec<String> = ["[CLS]", "[REG1]"]
            .into_iter()
            .map(String::from)
            .chain((0..2).flat_map(|r| (0..3).map(move |c| patch_name(r, c))))
            .collect();
        let row = vec![0.3, 0.1, 0.05, 0.2, 0.05, 0.1, 0.15, 0.05];
        Report {
            model: "m".into(),
            family: None,
            task: None,
            device: "cpu".into(),
            target: Target {
                index: 0,
                token: "[CLS]".into(),
            },
            tokens,
            special: Some(vec![true, true, false, false, false, false, false, false]),
            prediction: None,
            layers: 1,
            heads: 1,
            relevance: crate::relevance::Relevance {
                raw: vec![row.clone()],
                rollout: vec![row.clone()],
                flow: Some(vec![row]),
            },
            all_positions: None,
            importance: None,
            evaluation: None,
            methods: None,
            image: Some(ImageInfo {
                width: 30,
                height: 20,
                grid: [2, 3],
                patch: 10,
            }),
            picture: None,
        }
    }

    #[test]
    fn splits_leading_tokens_from_the_grid() {
        let view = View::full(report());
        let map = patch_map(&view, &view.report.relevance.raw[0]).unwrap();
        assert_eq!(map.leading, [("[CLS]", 0.3), ("[REG1]", 0.1)]);
        assert_eq!(map.grid, [[0.05, 0.2, 0.05], [0.1, 0.15, 0.05]]);
        assert_eq!(map.top(2), [(0, 1, 0.2), (1, 1, 0.15)]);
        assert_eq!(map.max(), 0.2);
    }

    #[test]
    fn without_the_special_tokens_the_grid_stays_whole() {
        let view = View::hide_special(report());
        let map = patch_map(&view, &view.report.relevance.raw[0]).unwrap();
        assert!(map.leading.iter().all(|(t, _)| *t == "[CLS]"), "{map:?}");
        assert_eq!(map.grid.len(), 2);
        assert!(map.grid[0][1] > map.grid[1][1]);
    }
}
