//! The interactive view's state (sort, selected node, the pane below the nodes) and what each
//! key does to it: a key in, the state changed and what the terminal loop must do out. No
//! terminal here: the binary maps its key events to [`Key`].

use crate::view::Sort;

/// The pane below the node table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pane {
    /// Each NodePool: readiness, nodes, limits used.
    #[default]
    NodePools,
    /// Each pending pod and kube-scheduler's reason.
    Pending,
    /// Karpenter's events, newest first.
    Events,
    /// The controller's answer for the selected node (`Enter`; `Esc` closes it).
    Explain,
}

/// A key that does something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    /// The next sort order (`s`).
    Sort,
    /// The next pane (`Tab`).
    Tab,
    /// Explain the selected node (`Enter`).
    Enter,
    /// Close the explanation (`Esc`).
    Escape,
    /// `q`, `Ctrl-C`.
    Quit,
}

impl Key {
    /// The key a character stands for: `j`/`k` move, `s` sorts, `q` quits, `g`/`G` go to the
    /// first and last node.
    pub fn from_char(c: char) -> Option<Key> {
        Some(match c {
            'j' => Key::Down,
            'k' => Key::Up,
            'g' => Key::Home,
            'G' => Key::End,
            's' => Key::Sort,
            'q' => Key::Quit,
            _ => return None,
        })
    }
}

/// What the loop does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Draw again (the state changed, or nothing happened).
    Redraw,
    /// Ask the controller about this node, then draw.
    Explain(String),
    /// Leave, restoring the terminal.
    Quit,
}

/// The state the keys change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ui {
    pub sort: Sort,
    /// Index of the selected node in the view's (sorted) rows.
    pub selected: usize,
    pub pane: Pane,
    /// The node whose explanation the `Explain` pane shows.
    pub explaining: Option<String>,
}

impl Sort {
    /// The order after this one (`s`).
    pub fn next(self) -> Sort {
        match self {
            Sort::Creation => Sort::Name,
            Sort::Name => Sort::Usage,
            Sort::Usage => Sort::Price,
            Sort::Price => Sort::Creation,
        }
    }

    /// Its name on the command line and in the footer.
    pub fn name(self) -> &'static str {
        match self {
            Sort::Creation => "creation",
            Sort::Name => "name",
            Sort::Usage => "usage",
            Sort::Price => "price",
        }
    }
}

impl Ui {
    /// A view starting in `sort`.
    pub fn new(sort: Sort) -> Ui {
        Ui {
            sort,
            ..Ui::default()
        }
    }

    /// The page of `page_rows` rows the selected node is on (0-based).
    pub fn page(&self, page_rows: usize) -> usize {
        self.selected / page_rows.max(1)
    }

    /// Keeps the selection on a node after the rows changed (`nodes` rows now).
    pub fn clamp(&mut self, nodes: usize) {
        self.selected = self.selected.min(nodes.saturating_sub(1));
    }

    /// `key` over `node_names` (the view's rows in order), with `page_rows` rows on a page.
    pub fn on_key(&mut self, key: Key, node_names: &[&str], page_rows: usize) -> Action {
        let last = node_names.len().saturating_sub(1);
        let page = page_rows.max(1);
        match key {
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => self.selected = (self.selected + 1).min(last),
            // A page down lands on the next page's first row, so the page indicator moves by one.
            Key::PageDown => self.selected = ((self.page(page) + 1) * page).min(last),
            Key::PageUp => self.selected = self.page(page).saturating_sub(1) * page,
            Key::Home => self.selected = 0,
            Key::End => self.selected = last,
            Key::Sort => {
                self.sort = self.sort.next();
                self.selected = 0;
            }
            Key::Tab => {
                self.pane = match self.pane {
                    Pane::NodePools => Pane::Pending,
                    Pane::Pending => Pane::Events,
                    Pane::Events | Pane::Explain => Pane::NodePools,
                };
            }
            Key::Enter => {
                if let Some(name) = node_names.get(self.selected) {
                    self.pane = Pane::Explain;
                    self.explaining = Some((*name).to_owned());
                    return Action::Explain((*name).to_owned());
                }
            }
            Key::Escape => {
                if self.pane == Pane::Explain {
                    self.pane = Pane::NodePools;
                }
                self.explaining = None;
            }
            Key::Quit => return Action::Quit,
        }
        Action::Redraw
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const NODES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

    #[test]
    fn page_keys_move_a_page_at_a_time_and_stop_at_the_ends() {
        let mut ui = Ui::default();
        assert_eq!(ui.on_key(Key::PageDown, &NODES, 3), Action::Redraw);
        assert_eq!((ui.selected, ui.page(3)), (3, 1));
        ui.on_key(Key::Down, &NODES, 3);
        ui.on_key(Key::PageDown, &NODES, 3);
        assert_eq!((ui.selected, ui.page(3)), (6, 2));
        ui.on_key(Key::PageDown, &NODES, 3);
        assert_eq!(ui.selected, 6, "the last page stays");
        ui.on_key(Key::PageUp, &NODES, 3);
        assert_eq!((ui.selected, ui.page(3)), (3, 1));
        ui.on_key(Key::PageUp, &NODES, 3);
        ui.on_key(Key::PageUp, &NODES, 3);
        assert_eq!(ui.selected, 0);
        ui.on_key(Key::Up, &NODES, 3);
        assert_eq!(ui.selected, 0, "no row above the first");
        ui.on_key(Key::End, &NODES, 3);
        assert_eq!(ui.selected, 6);
        ui.on_key(Key::Home, &NODES, 3);
        assert_eq!(ui.selected, 0);
    }

    #[test]
    fn the_sort_key_cycles_the_four_orders_from_the_top() {
        let mut ui = Ui::new(Sort::Creation);
        ui.selected = 4;
        let mut seen = Vec::new();
        for _ in 0..4 {
            ui.on_key(Key::Sort, &NODES, 3);
            seen.push(ui.sort.name());
            assert_eq!(ui.selected, 0);
        }
        assert_eq!(seen, ["name", "usage", "price", "creation"]);
    }

    #[test]
    fn enter_asks_about_the_selected_node_and_escape_closes_the_answer() {
        let mut ui = Ui::default();
        ui.on_key(Key::Down, &NODES, 3);
        assert_eq!(
            ui.on_key(Key::Enter, &NODES, 3),
            Action::Explain("b".into())
        );
        assert_eq!(ui.pane, Pane::Explain);
        ui.on_key(Key::Escape, &NODES, 3);
        assert_eq!((ui.pane, ui.explaining.as_deref()), (Pane::NodePools, None));
        assert_eq!(
            ui.on_key(Key::Enter, &[], 3),
            Action::Redraw,
            "no node, no question"
        );
        assert_eq!(ui.on_key(Key::Tab, &NODES, 3), Action::Redraw);
        assert_eq!(ui.pane, Pane::Pending);
        assert_eq!(ui.on_key(Key::Quit, &NODES, 3), Action::Quit);
    }

    #[test]
    fn tab_cycles_nodepools_pending_pods_and_events_and_leaves_an_explanation_for_the_nodepools() {
        let mut ui = Ui::default();
        let mut seen = vec![ui.pane];
        for _ in 0..3 {
            assert_eq!(ui.on_key(Key::Tab, &NODES, 3), Action::Redraw);
            seen.push(ui.pane);
        }
        assert_eq!(
            seen,
            [
                Pane::NodePools,
                Pane::Pending,
                Pane::Events,
                Pane::NodePools
            ]
        );
        ui.on_key(Key::Enter, &NODES, 3);
        assert_eq!(ui.pane, Pane::Explain);
        ui.on_key(Key::Tab, &NODES, 3);
        assert_eq!(ui.pane, Pane::NodePools);
        ui.on_key(Key::Tab, &NODES, 3);
        ui.on_key(Key::Tab, &NODES, 3);
        ui.on_key(Key::Escape, &NODES, 3);
        assert_eq!(ui.pane, Pane::Events, "Esc closes only an explanation");
    }

    #[test]
    fn characters_map_to_vi_keys_and_the_rest_do_nothing() {
        assert_eq!(Key::from_char('j'), Some(Key::Down));
        assert_eq!(Key::from_char('k'), Some(Key::Up));
        assert_eq!(Key::from_char('s'), Some(Key::Sort));
        assert_eq!(Key::from_char('q'), Some(Key::Quit));
        assert_eq!(Key::from_char('x'), None);
    }
}
