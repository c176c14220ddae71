//! The terminal report as snapshots: `--layers` grids in plain shades, 24-bit and 256
//! colours, `--hide-special`, and the colour choice of the command line.

mod common;

use bert_explain::report::{Colour, View};
use bert_explain::{Renderer, Terminal};
use common::{bin, fixture, repo};

fn render(view: &View, all_layers: bool, colour: Colour) -> String {
    let mut out = Vec::new();
    Terminal { all_layers, colour }
        .render(&view.clone().into(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// Escapes visible, so that snapshots show the colour codes.
fn visible(text: &str) -> String {
    text.replace('\x1b', "␛")
}

#[test]
fn layers_in_plain_shades() {
    let view = View::full(fixture("modern-author"));
    insta::assert_snapshot!(render(&view, true, Colour::Plain));
}

#[test]
fn layers_in_true_colour() {
    let view = View::full(fixture("modern-mary"));
    insta::assert_snapshot!(visible(&render(&view, true, Colour::TrueColour)));
}

#[test]
fn layers_in_256_colours() {
    let view = View::full(fixture("modern-mary"));
    insta::assert_snapshot!(visible(&render(&view, true, Colour::Ansi256)));
}

#[test]
fn hidden_special_tokens_keep_their_positions() {
    let view = View::hide_special(fixture("encoder-flowers"));
    insta::assert_snapshot!(render(&view, false, Colour::Plain));
}

/// Through the binary: stdout is a pipe here, so `auto` is plain, and NO_COLOR wins
/// over COLORTERM; `always` colours anyway.
#[test]
fn colour_choice_on_the_command_line() {
    let model = repo().join("models/tiny-bert-modern");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let output = bin()
            .arg("--model")
            .arg(&model)
            .args(["--layers", "Mary convinced John of [MASK] love"])
            .args(args)
            .envs(env.iter().copied())
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    let truecolor = [("COLORTERM", "truecolor")];
    assert!(!run(&[], &truecolor).contains('\x1b'));
    assert!(run(&[], &truecolor).contains('▓') || run(&[], &truecolor).contains('█'));
    assert!(run(&["--color", "always"], &truecolor).contains("\x1b[48;2;"));
    assert!(run(&["--color", "always"], &[]).contains("\x1b[48;5;"));
    assert!(!run(&["--color", "never"], &truecolor).contains('\x1b'));
}
