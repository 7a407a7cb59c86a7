//! The interactive view drawn with ratatui into a [`Buffer`]: the header (per resource, cost,
//! pods, the next consolidation's saving), the page of nodes that fits (the selected one
//! marked `>`), the pane below (NodePools, pending pods, Karpenter's events, or the selected
//! node's explanation; a Warning event in yellow) and a footer (sort, page, keys, what could
//! not be read). The facts are [`View`]'s and [`Explained`]'s; the cells are
//! [`mod@crate::render`]'s, so `--once` and the screen say the same.
//! No terminal here: the binary hands a frame's buffer in, tests a fixed-size one.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget};

use crate::explained::Explained;
use crate::render;
use crate::ui::{Pane, Ui};
use crate::view::{NodeRow, View};

/// The least room the node table keeps (its title row and one node).
const MIN_TABLE: u16 = 2;
/// The pane below the nodes takes at most this share of the height (1/N).
const PANE_SHARE: u16 = 3;

/// One frame: the facts and the state of the keys, and a note for the footer (e.g. when the
/// last list failed and the one before is shown).
#[derive(Debug, Clone, Copy)]
pub struct Screen<'a> {
    pub view: &'a View,
    pub ui: &'a Ui,
    pub explained: &'a Explained,
    pub note: &'a str,
}

/// The heights of the parts, for an area of `height` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Heights {
    header: u16,
    table: u16,
    pane: u16,
    footer: u16,
}

impl Screen<'_> {
    fn header(&self) -> Vec<String> {
        let mut lines = render::header(self.view);
        if let (Some(summary), Some(saving)) = (lines.last_mut(), self.explained.saving_per_hour) {
            summary.push_str(&render::saving(saving));
        }
        lines
    }

    fn pane_lines(&self, width: usize) -> (String, Vec<String>) {
        match self.ui.pane {
            Pane::NodePools => {
                let text = render::node_pools(self.view);
                let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
                if lines.is_empty() {
                    lines.push("no NodePools".to_owned());
                }
                let title = format!(
                    "NodePools ({}) · Tab: pending pods",
                    self.view.node_pools.len()
                );
                (title, lines)
            }
            Pane::Pending => {
                let mut lines = render::pending(self.view, width);
                if lines.is_empty() {
                    lines.push("no pending pods".to_owned());
                }
                (
                    format!("Pending pods ({}) · Tab: events", self.view.pending.len()),
                    lines,
                )
            }
            Pane::Events => {
                let mut lines = render::events(self.view, width);
                if let Some(problem) = &self.view.events_problem {
                    lines.insert(0, format!("events cannot be listed: {problem}"));
                } else if lines.is_empty() {
                    lines.push("no events from karpenter".to_owned());
                }
                (
                    format!("Events ({}) · Tab: NodePools", self.view.events.len()),
                    lines,
                )
            }
            Pane::Explain => {
                let node = self.ui.explaining.as_deref().unwrap_or_default();
                let lines = match &self.explained.node {
                    Some((name, lines)) if name == node => lines.clone(),
                    _ => match &self.explained.problem {
                        Some(problem) => vec![format!("the controller cannot be asked: {problem}")],
                        None => vec!["asking the controller…".to_owned()],
                    },
                };
                (format!("explain node {node} · Esc: close"), lines)
            }
        }
    }

    fn heights(&self, height: u16, pane_lines: usize) -> Heights {
        let header = u16::try_from(self.header().len()).unwrap_or(u16::MAX);
        let footer = 1;
        let fixed = header.saturating_add(footer).saturating_add(1);
        let wanted_pane = u16::try_from(pane_lines)
            .unwrap_or(u16::MAX)
            .saturating_add(1);
        let pane = wanted_pane
            .min(height / PANE_SHARE)
            .min(height.saturating_sub(fixed + MIN_TABLE));
        let table = height.saturating_sub(header + footer + pane + 1);
        Heights {
            header,
            table,
            pane: if pane >= 2 { pane } else { 0 },
            footer,
        }
    }

    /// How many nodes a page shows in an area of `height` rows (at least one).
    pub fn page_rows(&self, height: u16) -> usize {
        let (_, lines) = self.pane_lines(usize::MAX);
        let h = self.heights(height, lines.len());
        usize::from(h.table.saturating_sub(1).max(1))
    }

    fn node_row<'b>(&self, node: &NodeRow, cells: Vec<String>) -> Row<'b> {
        let status = if node.ready != "Ready" || !node.status.is_empty() {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new()
        };
        let status_column = 1 + node.usage.len() + 5;
        let mut row: Vec<Cell> = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == status_column {
                    Cell::from(c).style(status)
                } else {
                    Cell::from(c)
                }
            })
            .collect();
        if !self.explained.verdicts.is_empty() {
            let verdict = self
                .explained
                .verdicts
                .get(&node.name)
                .cloned()
                .unwrap_or_else(|| "-".to_owned());
            row.push(Cell::from(verdict));
        }
        Row::new(row)
    }

    fn draw_table(&self, area: Rect, buf: &mut Buffer) {
        let mut header = render::node_header(self.view);
        if !self.explained.verdicts.is_empty() {
            header.push("VERDICT".to_owned());
        }
        let all: Vec<Vec<String>> = self.view.nodes.iter().map(render::node_cells).collect();
        let mut widths: Vec<u16> = header.iter().map(|h| width_of(h)).collect();
        for (i, w) in widths.iter_mut().enumerate() {
            for row in &all {
                if let Some(cell) = row.get(i) {
                    *w = (*w).max(width_of(cell));
                }
            }
        }
        if let Some(verdict) = widths
            .last_mut()
            .filter(|_| !self.explained.verdicts.is_empty())
        {
            for word in self.explained.verdicts.values() {
                *verdict = (*verdict).max(width_of(word));
            }
        }
        let page_rows = usize::from(area.height.saturating_sub(1).max(1));
        let page = self.ui.page(page_rows);
        let first = page * page_rows;
        let rows: Vec<Row> = self
            .view
            .nodes
            .iter()
            .zip(all)
            .skip(first)
            .take(page_rows)
            .map(|(node, cells)| self.node_row(node, cells))
            .collect();
        let selected = self.ui.selected.checked_sub(first);
        let table = Table::new(rows, widths.into_iter().map(Constraint::Length))
            .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
            .column_spacing(2)
            .highlight_symbol(">")
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        let mut state = ratatui::widgets::TableState::new().with_selected(selected);
        ratatui::widgets::StatefulWidget::render(table, area, buf, &mut state);
    }

    fn footer(&self, page_rows: usize) -> String {
        let nodes = self.view.nodes.len();
        let pages = nodes.div_ceil(page_rows.max(1)).max(1);
        let position = if nodes == 0 {
            "no nodes".to_owned()
        } else {
            format!("node {}/{nodes}", self.ui.selected.min(nodes - 1) + 1)
        };
        let mut text = format!(
            "sort: {} │ page {}/{pages} │ {position} │ ",
            self.ui.sort.name(),
            self.ui.page(page_rows) + 1,
        );
        if let Some(problem) = &self.explained.problem {
            text.push_str(&format!("controller: {problem} │ "));
        }
        if !self.note.is_empty() {
            text.push_str(&format!("{} │ ", self.note));
        }
        text.push_str("s sort · ↑↓ jk select · PgUp PgDn page · Enter explain · Tab pane · q quit");
        text
    }
}

fn width_of(text: &str) -> u16 {
    u16::try_from(text.chars().count()).unwrap_or(u16::MAX)
}

impl Widget for &Screen<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (title, lines) = self.pane_lines(usize::from(area.width));
        let h = self.heights(area.height, lines.len());
        // The table takes the rows its page needs, the pane follows it, and what is left
        // stays blank above the footer.
        let page_rows = usize::from(h.table.saturating_sub(1).max(1));
        let on_page = self
            .view
            .nodes
            .len()
            .saturating_sub(self.ui.page(page_rows) * page_rows)
            .clamp(1, page_rows);
        let table_rows = h.table.min(u16::try_from(on_page + 1).unwrap_or(u16::MAX));
        let [header, _gap, table, pane, _rest, footer] = Layout::vertical([
            Constraint::Length(h.header),
            Constraint::Length(1),
            Constraint::Length(table_rows),
            Constraint::Length(h.pane),
            Constraint::Fill(1),
            Constraint::Length(h.footer),
        ])
        .areas(area);
        Paragraph::new(
            self.header()
                .into_iter()
                .map(Line::from)
                .collect::<Vec<_>>(),
        )
        .render(header, buf);
        self.draw_table(table, buf);
        if h.pane > 0 {
            // The events pane's rows follow its title row, one per event.
            let warning = |i: usize| {
                self.ui.pane == Pane::Events
                    && self.view.events_problem.is_none()
                    && i.checked_sub(1)
                        .and_then(|e| self.view.events.get(e))
                        .is_some_and(|e| e.type_ == "Warning")
            };
            let lines: Vec<Line> = lines
                .into_iter()
                .enumerate()
                .map(|(i, line)| {
                    let line = Line::from(line);
                    if warning(i) {
                        line.style(Style::new().fg(Color::Yellow))
                    } else {
                        line
                    }
                })
                .collect();
            Paragraph::new(lines)
                .block(
                    Block::new()
                        .borders(Borders::TOP)
                        .title(format!(" {title} ")),
                )
                .render(pane, buf);
        }
        Paragraph::new(self.footer(page_rows))
            .style(Style::new().add_modifier(Modifier::REVERSED))
            .render(footer, buf);
    }
}

/// A buffer's text, a line per row with trailing spaces cut (what a terminal capture shows).
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        for x in area.left()..area.right() {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
