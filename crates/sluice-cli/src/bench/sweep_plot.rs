//! The threshold sweep plot (SmartShuffle Figure 12): throughput and
//! aggregation rate against the spilling threshold (log scale).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

/// One sweep point.
#[derive(Debug, Clone)]
pub(crate) struct SweepPoint {
    pub(crate) series: String,
    pub(crate) threshold_kib: usize,
    pub(crate) gbit_per_s: f64,
    pub(crate) aggregation_rate: Option<f64>,
}

const COLORS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];

/// Writes two panels (throughput; aggregation rate) to an SVG file.
pub(crate) fn write_sweep_svg(
    path: &Path,
    points: &[SweepPoint],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut series: BTreeMap<&str, Vec<&SweepPoint>> = BTreeMap::new();
    for p in points {
        series.entry(p.series.as_str()).or_default().push(p);
    }
    let (lo, hi) = points.iter().fold((f64::MAX, 1.0f64), |(lo, hi), p| {
        let x = p.threshold_kib.max(1) as f64;
        (lo.min(x), hi.max(x))
    });
    let lo = lo.min(hi);
    let top = points.iter().map(|p| p.gbit_per_s).fold(0.0, f64::max) * 1.15 + 0.1;
    // The aggregation rate is negative when partials outweigh their input.
    let rate_min = points.iter().filter_map(|p| p.aggregation_rate).fold(0.0, f64::min) - 0.05;
    let root = SVGBackend::new(path, (1120, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let titles = ["throughput, Gbit/s", "aggregation rate"];
    for (k, area) in panels.iter().enumerate() {
        let (ymin, ymax) = if k == 0 { (0.0, top) } else { (rate_min, 1.05) };
        let mut chart = ChartBuilder::on(area)
            .caption(titles[k], ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d((lo..hi).log_scale(), ymin..ymax)?;
        chart.configure_mesh().x_desc("spilling threshold, KiB (log)").draw()?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let line: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| {
                    let y = if k == 0 { Some(p.gbit_per_s) } else { p.aggregation_rate };
                    y.map(|y| (p.threshold_kib.max(1) as f64, y))
                })
                .collect();
            if line.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart.draw_series(
                line.into_iter().map(|(x, y)| Circle::new((x, y), 3, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
