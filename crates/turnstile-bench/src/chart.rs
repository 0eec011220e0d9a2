//! SVG line charts for reports (plotters' SVG backend: no fonts or system libraries needed).

use std::path::Path;

use plotters::prelude::*;

/// Creates `path`'s folder if needed.
fn create_parent(path: &Path) -> Result<(), String> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display())),
        None => Ok(()),
    }
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with a log₂ x axis (thread counts) and a linear or log₁₀ y axis.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Title at the top.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Use a logarithmic y axis.
    pub log_y: bool,
    /// Use a linear x axis (time) instead of log₂ (thread counts).
    pub linear_x: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

impl LineChart {
    /// Writes the chart as an SVG file, creating its folder if needed.
    pub fn write_svg(&self, path: &Path) -> Result<(), String> {
        create_parent(path)?;
        let pts = || self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1) = (f64::MAX, f64::MIN);
        let (mut y0, mut y1) = (f64::MAX, f64::MIN);
        for &(x, y) in pts() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            if y.is_finite() && (!self.log_y || y > 0.0) {
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
        }
        if x0 > x1 || y0 > y1 {
            return Err(format!("chart '{}' has no points", self.title));
        }
        let fx = |x: f64| if self.linear_x { x } else { x.max(1.0).log2() };
        let (lx0, lx1) = (fx(x0), fx(x1).max(fx(x0) + 1.0));
        let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut b = ChartBuilder::on(&root);
        b.caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        let linear = self.linear_x;
        let xfmt = move |v: &f64| {
            if linear {
                format!("{v}")
            } else {
                format!("{}", 2f64.powf(*v).round())
            }
        };
        macro_rules! draw {
            ($chart:expr, $map:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .x_label_formatter(&xfmt)
                    .draw()
                    .map_err(|e| err(&e))?;
                for (i, s) in self.series.iter().enumerate() {
                    let c = COLORS[i % COLORS.len()];
                    let line: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .filter(|(_, y)| y.is_finite() && (!self.log_y || *y > 0.0))
                        .map(|&(x, y)| (fx(x), $map(y)))
                        .collect();
                    chart
                        .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                        .map_err(|e| err(&e))?
                        .label(s.name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                        });
                    chart
                        .draw_series(line.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                        .map_err(|e| err(&e))?;
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| err(&e))?;
            }};
        }
        if self.log_y {
            let c = b
                .build_cartesian_2d(lx0..lx1, (y0 * 0.8..y1 * 1.25).log_scale())
                .map_err(|e| err(&e))?;
            draw!(c, |y: f64| y);
        } else {
            let c = b
                .build_cartesian_2d(lx0..lx1, 0f64..y1 * 1.1)
                .map_err(|e| err(&e))?;
            draw!(c, |y: f64| y);
        }
        root.present().map_err(|e| err(&e))
    }
}

/// One panel of a [`BarChart`]: a value per category.
#[derive(Debug, Clone)]
pub struct BarPanel {
    /// The panel's caption.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// One value per category of the chart (non-finite values draw no bar).
    pub values: Vec<f64>,
}

/// Bar charts side by side, one panel per metric, sharing named categories on the x axis
/// (settings, where a line between them would mean nothing). Each bar carries its value.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Title at the top.
    pub title: String,
    /// The categories, left to right.
    pub categories: Vec<String>,
    /// The panels, left to right.
    pub panels: Vec<BarPanel>,
}

impl BarChart {
    /// Writes the chart as an SVG file, creating its folder if needed.
    pub fn write_svg(&self, path: &Path) -> Result<(), String> {
        let n = self.categories.len();
        if n == 0 || self.panels.is_empty() || self.panels.iter().any(|p| p.values.len() != n) {
            return Err(format!(
                "bar chart '{}' needs categories and one value per category in every panel",
                self.title
            ));
        }
        create_parent(path)?;
        let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
        // 500 px per panel keeps four category names such as `classic-10M` apart.
        let width = 500 * self.panels.len() as u32;
        let root = SVGBackend::new(path, (width, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(&self.title, ("sans-serif", 20))
            .map_err(|e| err(&e))?;
        let names = &self.categories;
        for (area, panel) in root
            .split_evenly((1, self.panels.len()))
            .iter()
            .zip(&self.panels)
        {
            let top = panel
                .values
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            // Head room above the tallest bar for its value label.
            let y1 = if top > 0.0 { top * 1.2 } else { 1.0 };
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((0..n).into_segmented(), 0f64..y1)
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(&panel.y_label)
                .x_labels(n)
                .x_label_formatter(&|v: &SegmentValue<usize>| match v {
                    SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                        names.get(*i).cloned().unwrap_or_default()
                    }
                    SegmentValue::Last => String::new(),
                })
                .draw()
                .map_err(|e| err(&e))?;
            for (i, &v) in panel.values.iter().enumerate() {
                if !v.is_finite() {
                    continue;
                }
                let c = COLORS[i % COLORS.len()];
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), v),
                    ],
                    c.filled(),
                );
                bar.set_margin(0, 0, 12, 12);
                chart
                    .draw_series(std::iter::once(bar))
                    .map_err(|e| err(&e))?;
                let label = if v >= 100.0 {
                    format!("{v:.0}")
                } else if v >= 1.0 {
                    format!("{v:.2}")
                } else {
                    format!("{v:.3}")
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        label,
                        (SegmentValue::CenterOf(i), v + y1 * 0.02),
                        ("sans-serif", 13).into_font().color(&BLACK),
                    )))
                    .map_err(|e| err(&e))?;
            }
        }
        root.present().map_err(|e| err(&e))
    }
}

/// A grid of labelled cells, one per point of a suite, each coloured by a ratio against a
/// target: green at or above it, through yellow, to red at `floor` or below.
#[derive(Debug, Clone)]
pub struct CellGrid {
    /// Title at the top.
    pub title: String,
    /// Cells per row.
    pub columns: usize,
    /// The ratio at and above which a cell is green.
    pub target: f64,
    /// The ratio at and below which a cell is red.
    pub floor: f64,
    /// Each cell's label lines (the first in bold) and its ratio.
    pub cells: Vec<(Vec<String>, f64)>,
}

impl CellGrid {
    fn colour(&self, r: f64) -> RGBColor {
        if !r.is_finite() {
            return RGBColor(200, 200, 200);
        }
        // 0 at the floor, 1 at the target: red (215, 48, 39) → yellow (254, 224, 139) → green
        // (26, 152, 80), ColorBrewer's RdYlGn ends and middle.
        let t = ((r - self.floor) / (self.target - self.floor)).clamp(0.0, 1.0);
        let mix = |a: (f64, f64, f64), b: (f64, f64, f64), t: f64| {
            RGBColor(
                (a.0 + (b.0 - a.0) * t) as u8,
                (a.1 + (b.1 - a.1) * t) as u8,
                (a.2 + (b.2 - a.2) * t) as u8,
            )
        };
        let (red, yellow, green) = (
            (215.0, 48.0, 39.0),
            (254.0, 224.0, 139.0),
            (26.0, 152.0, 80.0),
        );
        if t < 0.5 {
            mix(red, yellow, t * 2.0)
        } else {
            mix(yellow, green, t * 2.0 - 1.0)
        }
    }

    /// Writes the grid as an SVG file, creating its folder if needed.
    pub fn write_svg(&self, path: &Path) -> Result<(), String> {
        if self.cells.is_empty() || self.columns == 0 {
            return Err(format!(
                "cell grid '{}' needs cells and columns",
                self.title
            ));
        }
        create_parent(path)?;
        let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
        let rows = self.cells.len().div_ceil(self.columns);
        let (cw, ch) = (260i32, 110i32);
        let size = (
            (cw * self.columns as i32) as u32,
            (40 + ch * rows as i32) as u32,
        );
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(&self.title, ("sans-serif", 18))
            .map_err(|e| err(&e))?;
        for (i, (lines, ratio)) in self.cells.iter().enumerate() {
            let (x, y) = (
                (i % self.columns) as i32 * cw,
                (i / self.columns) as i32 * ch,
            );
            root.draw(&Rectangle::new(
                [(x + 3, y + 3), (x + cw - 3, y + ch - 3)],
                self.colour(*ratio).filled(),
            ))
            .map_err(|e| err(&e))?;
            for (j, line) in lines.iter().enumerate() {
                let font = if j == 0 {
                    ("sans-serif", 15).into_font().style(FontStyle::Bold)
                } else {
                    ("sans-serif", 13).into_font()
                };
                root.draw(&Text::new(
                    line.clone(),
                    (x + 10, y + 10 + 20 * j as i32),
                    font.color(&BLACK),
                ))
                .map_err(|e| err(&e))?;
            }
        }
        root.present().map_err(|e| err(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_series_named() {
        let dir = std::env::temp_dir().join(format!("turnstile-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.svg");
        LineChart {
            title: "ns per loop".into(),
            x_label: "threads".into(),
            y_label: "ns".into(),
            log_y: true,
            linear_x: false,
            series: vec![
                Series {
                    name: "alpha".into(),
                    points: vec![(1.0, 10.0), (2.0, 20.0), (4.0, 80.0)],
                },
                Series {
                    name: "beta".into(),
                    points: vec![(1.0, 15.0), (4.0, 30.0)],
                },
            ],
        }
        .write_svg(&path)
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("alpha") && svg.contains("beta"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_a_bar_chart_with_every_category_and_panel_named() {
        let dir = std::env::temp_dir().join(format!("turnstile-bars-{}", std::process::id()));
        let path = dir.join("b.svg");
        let chart = BarChart {
            title: "mixed".into(),
            categories: vec!["first".into(), "second".into()],
            panels: vec![
                BarPanel {
                    title: "slowdown".into(),
                    y_label: "×".into(),
                    values: vec![1.5, 4.0],
                },
                BarPanel {
                    title: "p99".into(),
                    y_label: "ms".into(),
                    values: vec![0.02, f64::NAN],
                },
            ],
        };
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for s in ["first", "second", "slowdown", "p99", "4.00"] {
            assert!(svg.contains(s), "{s} missing");
        }
        let bad = BarChart {
            categories: vec!["only".into()],
            ..chart
        };
        assert!(bad.write_svg(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_a_cell_grid_with_every_label_and_refuses_an_empty_one() {
        let dir = std::env::temp_dir().join(format!("turnstile-grid-{}", std::process::id()));
        let path = dir.join("g.svg");
        let grid = CellGrid {
            title: "auto ÷ best".into(),
            columns: 2,
            target: 0.95,
            floor: 0.7,
            cells: vec![
                (vec!["one".into(), "0.99".into()], 0.99),
                (vec!["two".into(), "0.50".into()], 0.5),
                (vec!["three".into()], f64::NAN),
            ],
        };
        assert_eq!(
            grid.colour(1.2),
            grid.colour(0.95),
            "green at and above the target"
        );
        assert_eq!(
            grid.colour(0.1),
            grid.colour(0.7),
            "red at and below the floor"
        );
        grid.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for s in ["one", "two", "three", "0.50"] {
            assert!(svg.contains(s), "{s} missing");
        }
        let empty = CellGrid {
            cells: vec![],
            ..grid
        };
        assert!(empty.write_svg(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
