//! The `simulate --svg` chart: context per model call with and without compaction, against the
//! window and the hook's two thresholds; the provider's own count where the log records it,
//! declined compactions as crosses, the provider's own compactions as vertical lines, refetches
//! (calls repeated after their result was taken out) as triangles.

use anyhow::{anyhow, Result};
use compaction_hook::CompactionHookSettings;
use compaction_replay::Step;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// What the chart shows.
#[derive(Debug)]
pub struct Chart<'a> {
    /// The title: the input and the counter.
    pub title: String,
    /// The replay's model calls.
    pub steps: &'a [Step],
    /// The window and thresholds drawn as horizontal lines.
    pub settings: CompactionHookSettings,
    /// The calls (step numbers) that first saw a conversation the provider had compacted.
    pub compactions: Vec<usize>,
}

const SIZE: (u32, u32) = (1200, 640);
/// The legend sits in its own column to the right of the plot, so it never covers a line.
const LEGEND_WIDTH: u32 = 270;
const FONT: &str = "sans-serif";

const WITHOUT: RGBColor = RGBColor(214, 39, 40);
const WITH: RGBColor = RGBColor(31, 119, 180);
const WINDOW: RGBColor = RGBColor(40, 40, 40);
const COMPACT_AT: RGBColor = RGBColor(230, 140, 0);
const COMPACT_TO: RGBColor = RGBColor(44, 160, 44);
const PROVIDER: RGBColor = RGBColor(148, 103, 189);
const DECLINED: RGBColor = RGBColor(120, 120, 120);
const REFETCH: RGBColor = RGBColor(227, 119, 194);

/// The chart as an SVG document.
pub fn svg(chart: &Chart<'_>) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root, chart).map_err(|e| anyhow!("drawing the chart: {e}"))?;
        root.present().map_err(|e| anyhow!("drawing the chart: {e}"))?;
    }
    Ok(out)
}

/// One legend entry: a sample of the line and its label.
struct Entry {
    label: String,
    color: RGBColor,
    dashed: bool,
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_>,
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let root = root.titled(&chart.title, (FONT, 22))?;
    let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);

    let settings = chart.settings;
    // As the hook computes its thresholds.
    let (at, to) = (settings.threshold(), settings.budget());
    let calls = chart.steps.len().max(1);
    let highest =
        chart.steps.iter().map(|s| s.without.max(s.estimate).max(s.provider.unwrap_or(0))).max().unwrap_or(0);
    let top = (highest.max(settings.context_window) as f64 * 1.08).ceil() as usize;

    let mut context = ChartBuilder::on(&plot)
        .margin_top(10)
        .margin_left(10)
        .margin_right(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        // One call of padding on either side keeps the first and last drops off the axes.
        .build_cartesian_2d(0..calls + 1, 0..top.max(1))?;
    context
        .configure_mesh()
        .x_desc("model call")
        .y_desc("tokens in context")
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(&|v| if (1..=calls).contains(v) { v.to_string() } else { String::new() })
        .y_label_formatter(&|v| tokens(*v))
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()?;

    let span = [0, calls + 1];
    let level = |value: usize| span.iter().map(move |&x| (x, value)).collect::<Vec<_>>();
    context.draw_series(LineSeries::new(level(settings.context_window), WINDOW.stroke_width(2)))?;
    context.draw_series(DashedLineSeries::new(level(at), 8, 5, COMPACT_AT.stroke_width(2)))?;
    context.draw_series(DashedLineSeries::new(level(to), 8, 5, COMPACT_TO.stroke_width(2)))?;

    context.draw_series(LineSeries::new(
        chart.steps.iter().map(|s| (s.step, s.without)),
        WITHOUT.stroke_width(2),
    ))?;
    // Each call's context rises to the hook's estimate and drops to what was sent, so a
    // compaction shows as a vertical drop.
    let with = chart.steps.iter().flat_map(|s| [(s.step, s.estimate), (s.step, s.with)]);
    context.draw_series(LineSeries::new(with, WITH.stroke_width(2)))?;
    // The provider's own count of each call's prompt, where the log records it.
    let provider: Vec<(usize, usize)> =
        chart.steps.iter().filter_map(|s| Some((s.step, s.provider?))).collect();
    if !provider.is_empty() {
        context.draw_series(DashedLineSeries::new(
            provider.iter().copied(),
            3,
            3,
            PROVIDER.stroke_width(2),
        ))?;
        context.draw_series(provider.iter().map(|&p| Circle::new(p, 2, PROVIDER.filled())))?;
    }
    // Calls where the estimate reached the threshold but the compactor could not get below the
    // target.
    let declined = chart.steps.iter().filter(|s| s.triggered && !s.compacted);
    context.draw_series(declined.map(|s| Cross::new((s.step, s.estimate), 6, DECLINED.stroke_width(2))))?;
    // Calls that repeated an earlier call whose result had been taken out, on the line sent.
    let refetched: Vec<&Step> = refetches(chart.steps).collect();
    context
        .draw_series(refetched.iter().map(|s| TriangleMarker::new((s.step, s.with), 6, REFETCH.filled())))?;
    // The provider's (or agent's) own compactions.
    for &step in &chart.compactions {
        let line = vec![(step, 0), (step, top)];
        context.draw_series(DashedLineSeries::new(line, 4, 4, PROVIDER.stroke_width(1)))?;
    }
    // A single call draws no line; a dot keeps it visible.
    if chart.steps.len() == 1 {
        let s = &chart.steps[0];
        context.draw_series([Circle::new((s.step, s.without), 4, WITHOUT.filled())])?;
        context.draw_series([Circle::new((s.step, s.with), 4, WITH.filled())])?;
    }

    let mut entries = vec![
        Entry { label: "without compaction".into(), color: WITHOUT, dashed: false },
        Entry { label: "with compaction".into(), color: WITH, dashed: false },
        Entry {
            label: format!("context window ({})", tokens(settings.context_window)),
            color: WINDOW,
            dashed: false,
        },
        Entry {
            label: format!("compact at {} ({})", settings.compact_at, tokens(at)),
            color: COMPACT_AT,
            dashed: true,
        },
        Entry {
            label: format!("compact to {} ({})", settings.compact_to, tokens(to)),
            color: COMPACT_TO,
            dashed: true,
        },
    ];
    if !provider.is_empty() {
        entries.push(Entry { label: "provider's count".into(), color: PROVIDER, dashed: true });
    }
    if chart.steps.iter().any(|s| s.triggered && !s.compacted) {
        entries.push(Entry {
            label: "x declined (target not reached)".into(),
            color: DECLINED,
            dashed: false,
        });
    }
    if !refetched.is_empty() {
        entries.push(Entry {
            label: "\u{25b2} refetch (result taken out before)".into(),
            color: REFETCH,
            dashed: false,
        });
    }
    if !chart.compactions.is_empty() {
        entries.push(Entry { label: "| provider compacted".into(), color: PROVIDER, dashed: true });
    }
    draw_legend(&legend, &entries, chart.steps)?;
    Ok(())
}

/// The steps whose reply repeated a call whose result had been taken out.
fn refetches(steps: &[Step]) -> impl Iterator<Item = &Step> {
    let before = std::iter::once(0).chain(steps.iter().map(|s| s.refetches));
    steps.iter().zip(before).filter(|(s, before)| s.refetches > *before).map(|(s, _)| s)
}

fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[Entry],
    steps: &[Step],
) -> Result<(), Box<dyn std::error::Error>> {
    let font = (FONT, 14).into_font();
    let (left, sample, mut y) = (10, 34, 30);
    for entry in entries {
        let line = vec![(left, y), (left + sample, y)];
        let style = entry.color.stroke_width(2);
        if entry.dashed {
            area.draw(&DashedPathElement::new(line, 8, 5, style))?;
        } else {
            area.draw(&PathElement::new(line, style))?;
        }
        let text = TextStyle::from(font.clone()).pos(text_anchor());
        area.draw(&Text::new(entry.label.clone(), (left + sample + 10, y), text))?;
        y += 26;
    }

    let peak = |f: fn(&Step) -> usize| steps.iter().map(f).max().unwrap_or(0);
    let sent = |f: fn(&Step) -> usize| steps.iter().map(f).sum::<usize>();
    let compactions = steps.iter().filter(|s| s.compacted).count();
    // (label, values): the values go on their own line, indented by position (SVG collapses
    // leading spaces).
    let lines = [
        (
            "peak context",
            format!("without {}, with {}", tokens(peak(|s| s.without)), tokens(peak(|s| s.with))),
        ),
        (
            "tokens sent over the run",
            format!("without {}, with {}", tokens(sent(|s| s.without)), tokens(sent(|s| s.with))),
        ),
        ("compaction", format!("compacted {compactions} of {} calls", steps.len())),
    ];
    y += 20;
    let heading = TextStyle::from((FONT, 14).into_font()).color(&RGBColor(60, 60, 60)).pos(text_anchor());
    let value = TextStyle::from((FONT, 14).into_font()).color(&BLACK).pos(text_anchor());
    for (label, values) in lines {
        area.draw(&Text::new(label.to_owned(), (left, y), heading.clone()))?;
        area.draw(&Text::new(values, (left + 14, y + 20), value.clone()))?;
        y += 48;
    }
    Ok(())
}

fn text_anchor() -> plotters::style::text_anchor::Pos {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    Pos::new(HPos::Left, VPos::Center)
}

/// A token count for labels: `950`, `12.5k`, `1.2M`.
fn tokens(value: usize) -> String {
    let v = value as f64;
    let short = |n: f64, unit: &str| {
        let text = format!("{n:.1}");
        format!("{}{unit}", text.strip_suffix(".0").unwrap_or(&text))
    };
    match value {
        0..1_000 => value.to_string(),
        1_000..1_000_000 => short(v / 1e3, "k"),
        _ => short(v / 1e6, "M"),
    }
}

#[cfg(test)]
mod tests {
    use super::tokens;

    #[test]
    fn token_labels() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_000), "12k");
        assert_eq!(tokens(12_540), "12.5k");
        assert_eq!(tokens(1_240_000), "1.2M");
    }
}
