//! PNG line charts with plotters' bitmap backend: title and subtitle (the machine), axis
//! descriptions with units, legend, an optional log2 x axis and an optional secondary y axis
//! (dashed series).
//!
//! The primary y axis turns logarithmic by itself when its values span more than
//! [`LOG_Y_ABOVE`]x: on a linear axis the fast method would be a flat line at the bottom.
//!
//! Text is rendered with ab_glyph from DejaVu Sans embedded by the `dejavu` crate, so plots look
//! the same on a fresh machine without system fonts (no fontconfig, no fonts package).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

const FONT: &str = "sans-serif";

/// The largest max/min ratio of the primary y values still drawn on a linear axis.
pub const LOG_Y_ABOVE: f64 = 10.0;

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Index into the palette (default: the series' position), so that a reference line can share
    /// the colour of the line it belongs to.
    pub color: Option<usize>,
}

impl Series {
    pub fn solid(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { label: label.into(), points, dashed: false, color: None }
    }

    pub fn dashed(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { label: label.into(), points, dashed: true, color: None }
    }

    /// The same series drawn in palette colour `i`.
    pub fn colored(self, i: usize) -> Self {
        Series { color: Some(i), ..self }
    }
}

/// A chart: primary series on the left axis, optional secondary series on the right axis.
#[derive(Clone, Debug, Default)]
pub struct Figure {
    pub title: String,
    /// A second, smaller title line (the machine and thread count).
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    /// Plot x on a log2 scale (labels keep the real values: 4K, 8K, ...).
    pub x_log2: bool,
    pub series: Vec<Series>,
    pub secondary_label: Option<String>,
    pub secondary: Vec<Series>,
}

fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!("cannot load the embedded DejaVu Sans font"))
    }
}

/// `4096` as `4K`, `1048576` as `1M`.
pub fn human(n: f64) -> String {
    let n = n.round();
    if n >= 1048576.0 && n % 1048576.0 == 0.0 {
        format!("{}M", n / 1048576.0)
    } else if n >= 1024.0 && n % 1024.0 == 0.0 {
        format!("{}K", n / 1024.0)
    } else {
        format!("{n}")
    }
}

fn color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

fn bounds(series: &[Series], f: impl Fn(&(f64, f64)) -> f64) -> (f64, f64) {
    let vals = series.iter().flat_map(|s| s.points.iter().map(&f));
    vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// Whether values spanning `lo..=hi` go on a log axis: all positive, more than [`LOG_Y_ABOVE`]x apart.
pub fn wants_log(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi.is_finite() && hi / lo > LOG_Y_ABOVE
}

/// A label of a log10 axis at `v` (= log10 of the value): the value where it is 1, 2 or 5 times a
/// power of ten, else nothing (the tick stays a grid line).
fn log_label(v: f64) -> String {
    let value = 10f64.powf(v);
    let decade = 10f64.powf(v.floor());
    let mantissa = value / decade;
    let near = |m: f64| (mantissa - m).abs() / m < 0.03;
    if ![1.0, 2.0, 5.0, 10.0].into_iter().any(near) {
        return String::new();
    }
    let rounded = (value / decade).round() * decade;
    if rounded >= 1.0 {
        format!("{rounded:.0}")
    } else {
        let text = format!("{rounded:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A line's points with the x and y ranges of the axes it is drawn against.
type Placed = (Vec<(f64, f64)>, (f64, f64), (f64, f64));

/// The corner of the plot where the legend hides the fewest line samples: each series is sampled
/// along its segments in coordinates normalised to the plot, and the legend box of `entries`
/// lines is tried in each corner (upper right first on ties).
fn legend_corner(series: &[Placed], entries: usize) -> SeriesLabelPosition {
    // Legend box as a share of the plot: about 40 % of its width, 20 px a line of about 520 px.
    let (w, h) = (0.42, ((entries as f64 * 20.0 + 16.0) / 520.0).min(0.95));
    let mut samples = Vec::new();
    for (points, (x0, x1), (y0, y1)) in series {
        let norm = |&(x, y): &(f64, f64)| ((x - x0) / (x1 - x0).max(1e-12), (y - y0) / (y1 - y0).max(1e-12));
        let pts: Vec<(f64, f64)> = points.iter().map(norm).collect();
        samples.extend(pts.iter().copied());
        for pair in pts.windows(2) {
            let ((ax, ay), (bx, by)) = (pair[0], pair[1]);
            samples.extend((1..20).map(|k| {
                let t = f64::from(k) / 20.0;
                (ax + (bx - ax) * t, ay + (by - ay) * t)
            }));
        }
    }
    let corners = [
        (SeriesLabelPosition::UpperRight, 1.0 - w, 1.0 - h),
        (SeriesLabelPosition::UpperLeft, 0.0, 1.0 - h),
        (SeriesLabelPosition::LowerRight, 1.0 - w, 0.0),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.0),
    ];
    let hidden =
        |bx: f64, by: f64| samples.iter().filter(|&&(x, y)| x >= bx && x <= bx + w && y >= by && y <= by + h).count();
    let mut best = (usize::MAX, SeriesLabelPosition::UpperRight);
    for (pos, bx, by) in corners {
        let n = hidden(bx, by);
        if n < best.0 {
            best = (n, pos);
        }
    }
    best.1
}

/// Draws `fig` into a PNG at `path`.
///
/// # Errors
/// When there is nothing to draw, the font cannot load, or the file cannot be written.
pub fn draw(path: &Path, fig: &Figure) -> Result<()> {
    ensure_font()?;
    let tx = |x: f64| if fig.x_log2 { x.max(f64::MIN_POSITIVE).log2() } else { x };
    let map = |s: &Series| Series { points: s.points.iter().map(|&(x, y)| (tx(x), y)).collect(), ..s.clone() };
    let primary: Vec<Series> = fig.series.iter().map(map).collect();
    let secondary: Vec<Series> = fig.secondary.iter().map(map).collect();
    let all: Vec<Series> = primary.iter().chain(&secondary).cloned().collect();
    let (x0, x1) = bounds(&all, |p| p.0);
    if !x0.is_finite() {
        return Err(anyhow!("nothing to plot for {}", path.display()));
    }
    let pad = ((x1 - x0) * 0.04).max(0.25);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let (lo, hi) = bounds(&primary, |p| p.1);
    let y_log = wants_log(lo, hi);
    let primary: Vec<Series> = if y_log {
        primary
            .iter()
            .map(|s| Series { points: s.points.iter().map(|&(x, y)| (x, y.log10())).collect(), ..s.clone() })
            .collect()
    } else {
        primary
    };
    // A log axis spans whole decades' worth of room around the data; a linear one starts at 0.
    let (y0, y1) = if y_log { (lo.log10() - 0.15, hi.log10() + 0.15) } else { (0.0, hi.max(1e-9) * 1.12) };
    let y2 = bounds(&secondary, |p| p.1).1.max(1.0) * 1.12;

    let root = BitMapBackend::new(path, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
    let titled = root.titled(&fig.title, (FONT, 26)).map_err(|e| anyhow!("plot: {e}"))?;
    let area = if fig.subtitle.is_empty() {
        titled
    } else {
        titled
            .titled(&fig.subtitle, (FONT, 17).into_font().color(&RGBColor(80, 80, 80)))
            .map_err(|e| anyhow!("plot: {e}"))?
    };
    let mut chart = ChartBuilder::on(&area)
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .right_y_label_area_size(if secondary.is_empty() { 0 } else { 80 })
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| anyhow!("plot: {e}"))?;
    let log2 = fig.x_log2;
    let x_fmt = move |v: &f64| {
        if (v - v.round()).abs() > 1e-6 {
            if log2 {
                String::new()
            } else {
                format!("{v:.1}")
            }
        } else if log2 {
            human(2f64.powf(v.round()))
        } else {
            format!("{}", v.round())
        }
    };
    let n_labels = if log2 { ((x1 - x0).ceil() as usize + 1).max(2) } else { 10 };
    let mut placed: Vec<Placed> = primary.iter().map(|s| (s.points.clone(), (x0, x1), (y0, y1))).collect();
    placed.extend(secondary.iter().map(|s| (s.points.clone(), (x0, x1), (0.0, y2))));
    let corner = legend_corner(&placed, primary.len() + secondary.len());
    let y_axis = YAxis {
        label: if y_log { format!("{} (log scale)", fig.y_label) } else { fig.y_label.clone() },
        // Ask for ticks every 0.1 decade, so that 1, 2 and 5 times each power of ten get one.
        n_labels: if y_log { ((y1 - y0) * 10.0).ceil() as usize + 1 } else { 10 },
        format: Box::new(move |v: &f64| if y_log { log_label(*v) } else { format!("{v}") }),
    };
    if secondary.is_empty() {
        mesh(&mut chart, fig, &y_axis, n_labels, &x_fmt)?;
        draw_primary(&mut chart, &primary)?;
        legend(&mut chart, corner)?;
    } else {
        // The secondary coordinate must exist before the mesh, so that the primary labels stay on
        // the left and the right axis shows only the secondary scale.
        let mut chart = chart.set_secondary_coord(x0..x1, 0f64..y2);
        mesh(&mut chart, fig, &y_axis, n_labels, &x_fmt)?;
        chart
            .configure_secondary_axes()
            .y_desc(fig.secondary_label.as_deref().unwrap_or(""))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        draw_primary(&mut chart, &primary)?;
        for (i, s) in secondary.iter().enumerate() {
            let style = ShapeStyle {
                color: color(s.color.unwrap_or(primary.len() + i)).to_rgba(),
                filled: false,
                stroke_width: 2,
            };
            chart
                .draw_secondary_series(DashedLineSeries::new(s.points.clone(), 8, 6, style))
                .map_err(|e| anyhow!("plot: {e}"))?
                .label(s.label.as_str())
                .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 24, y)], 8, 5, style));
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(corner)
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
    }
    root.present().map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The primary y axis: its description, how many ticks to ask for, and their labels.
struct YAxis {
    label: String,
    n_labels: usize,
    format: Box<dyn Fn(&f64) -> String>,
}

fn mesh(
    chart: &mut Chart<'_, '_>,
    fig: &Figure,
    y: &YAxis,
    n_labels: usize,
    x_fmt: &dyn Fn(&f64) -> String,
) -> Result<()> {
    chart
        .configure_mesh()
        .x_desc(fig.x_label.as_str())
        .y_desc(y.label.as_str())
        .x_labels(n_labels)
        .x_label_formatter(x_fmt)
        .y_labels(y.n_labels)
        .y_label_formatter(&y.format)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        // A log axis already has a tick every 0.1 decade; finer lines would only grey the chart.
        .max_light_lines(if y.n_labels > 10 { 1 } else { 5 })
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))
}

fn draw_primary(chart: &mut Chart<'_, '_>, series: &[Series]) -> Result<()> {
    for (i, s) in series.iter().enumerate() {
        let c = color(s.color.unwrap_or(i));
        let style = ShapeStyle { color: c.to_rgba(), filled: false, stroke_width: 2 };
        let anno = if s.dashed {
            chart.draw_series(DashedLineSeries::new(s.points.clone(), 8, 6, style))
        } else {
            chart.draw_series(LineSeries::new(s.points.clone(), style))
        }
        .map_err(|e| anyhow!("plot: {e}"))?;
        let anno = anno.label(s.label.as_str());
        if s.dashed {
            anno.legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 24, y)], 8, 5, style));
        } else {
            anno.legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        if !s.dashed {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(|e| anyhow!("plot: {e}"))?;
        }
    }
    Ok(())
}

fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, corner: SeriesLabelPosition) -> Result<()> {
    chart
        .configure_series_labels()
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(corner)
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human(4096.0), "4K");
        assert_eq!(human(1048576.0), "1M");
        assert_eq!(human(3.0), "3");
    }

    #[test]
    fn legend_avoids_the_lines() {
        let range = ((0.0, 1.0), (0.0, 1.0));
        // A line along the top: the legend goes to a lower corner.
        let top = vec![(vec![(0.0, 0.98), (1.0, 0.98)], range.0, range.1)];
        assert!(matches!(legend_corner(&top, 2), SeriesLabelPosition::LowerRight));
        // A falling diagonal crosses the upper left and lower right corners.
        let falling = vec![(vec![(0.0, 1.0), (1.0, 0.0)], range.0, range.1)];
        assert!(matches!(legend_corner(&falling, 2), SeriesLabelPosition::UpperRight));
    }

    #[test]
    fn log_axis_only_beyond_ten_x() {
        assert!(wants_log(1.0, 10.5));
        assert!(!wants_log(1.0, 9.0));
        assert!(!wants_log(0.0, 100.0));
        assert_eq!(log_label(0.0), "1");
        assert_eq!(log_label(2.0f64.log10()), "2");
        assert_eq!(log_label(2.0 + 5.0f64.log10()), "500");
        assert_eq!(log_label(-1.0), "0.1");
        assert_eq!(log_label(3.0f64.log10()), "");
    }

    #[test]
    fn draws_a_png_with_both_axes() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("lopt-eval-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("t.png");
        let fig = Figure {
            title: "t".into(),
            subtitle: "2 cores, test CPU; 2 threads".into(),
            x_label: "x (bytes)".into(),
            y_label: "y (ms)".into(),
            x_log2: true,
            // 1 to 300: more than 10x apart, so the y axis is logarithmic.
            series: vec![Series::solid("a", vec![(1024.0, 1.0), (4096.0, 300.0)])],
            secondary_label: Some("n".into()),
            secondary: vec![Series::dashed("n", vec![(1024.0, 4.0), (4096.0, 1.0)])],
        };
        draw(&path, &fig)?;
        let bytes = std::fs::read(&path)?;
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
