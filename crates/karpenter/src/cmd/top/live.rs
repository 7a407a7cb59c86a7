//! `karpenter top` on a terminal: the alternate screen in raw mode, `karpenter_top::Screen`
//! drawn by ratatui, keys read with crossterm. The cluster is listed once and then watched
//! ([`karpenter_top::Watch`]: its watchers run as tasks on the runtime and keep one
//! [`Listed`]); asking the controller runs as a task too and hands its latest answer over a
//! watch channel. This loop owns the terminal, rebuilds the view from the watched [`Listed`] at
//! most every `--interval` when something changed, redraws on a new view, a key or a resize,
//! and restores the terminal on quit, on an error and on a panic (ratatui's hook).

use std::time::{Duration, Instant};

use anyhow::Context;
use karpenter_controller::explain::client::Target;
use karpenter_top::{Action, Explained, Key, Listed, Options, Screen, Status, Ui, Watch};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::{mpsc, watch};

use super::controller;

/// How long the loop waits for a key before looking for new answers.
const TICK: Duration = Duration::from_millis(200);

/// What the loop runs with.
pub(super) struct Live {
    pub client: kube::Client,
    /// The latest prices (AWS's replace the catalog's when read).
    pub prices: watch::Receiver<super::prices::Shared>,
    pub options: Options,
    pub interval: Duration,
    /// Where the controller is asked (`None`: not asked).
    pub controller: Option<Target>,
}

/// With nothing changed, the view is still rebuilt this often: its ages move on.
const IDLE_REFRESH: Duration = Duration::from_secs(10);

/// Leaves raw mode and the alternate screen when dropped, also on an early return.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

fn key(event: &event::KeyEvent) -> Option<Key> {
    if event.kind != KeyEventKind::Press {
        return None;
    }
    if event.modifiers.contains(KeyModifiers::CONTROL) && event.code == KeyCode::Char('c') {
        return Some(Key::Quit);
    }
    Some(match event.code {
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Tab => Key::Tab,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Escape,
        KeyCode::Char(c) => return Key::from_char(c),
        _ => return None,
    })
}

/// Starts the watchers of the cluster on the runtime; the receiver tells their changes (taken
/// before they start: a watcher stops once no one receives).
fn spawn_watchers(
    runtime: &tokio::runtime::Runtime,
    live: &Live,
) -> (Watch, watch::Receiver<Status>) {
    let watch = Watch::new();
    let status = watch.subscribe();
    for watcher in watch.watchers(&live.client) {
        runtime.spawn(watcher);
    }
    (watch, status)
}

/// The note under the header: a kind that cannot be watched (its objects stay as last seen),
/// else when the view was last updated.
fn note(status: &Status) -> String {
    match status.problems.values().next() {
        Some(problem) => format!("{problem}; showing what was last seen"),
        None if status.synced() => format!(
            "watching, updated {}",
            chrono::Utc::now().format("%H:%M:%S UTC")
        ),
        None => "listing…".to_owned(),
    }
}

fn spawn_pass_asker(
    runtime: &tokio::runtime::Runtime,
    target: Target,
    interval: Duration,
) -> watch::Receiver<Option<Result<Option<controller::Pass>, String>>> {
    let (tx, rx) = watch::channel(None);
    runtime.spawn(async move {
        loop {
            if tx.send(Some(controller::ask_pass(&target).await)).is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    });
    rx
}

/// Runs until `q` or Ctrl-C.
pub(super) fn run(runtime: &tokio::runtime::Runtime, mut live: Live) -> anyhow::Result<()> {
    let mut prices = live.prices.borrow_and_update().clone();
    let (watch, mut status_rx) = spawn_watchers(runtime, &live);
    let mut synced = false;
    // When the view was last rebuilt from the watched list.
    let mut built: Option<Instant> = None;
    let mut pass_rx = live
        .controller
        .clone()
        .map(|t| spawn_pass_asker(runtime, t, live.interval));
    let (node_tx, mut node_rx) = mpsc::unbounded_channel::<(String, Vec<String>)>();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _restore = Restore;
    let mut ui = Ui::new(live.options.sort);
    let mut explained = Explained::default();
    let mut note = "listing…".to_owned();
    let mut view = karpenter_top::view(
        &Listed::default(),
        prices.as_ref(),
        &live.options,
        chrono::Utc::now(),
    );
    let mut stale = true;
    // The screen is drawn again only when something on it changed (a new view, a key, a
    // resize, an answer): an idle top costs next to nothing.
    let mut redraw = true;
    let mut page_rows = 0;
    loop {
        if live.prices.has_changed().unwrap_or(false) {
            prices = live.prices.borrow_and_update().clone();
            stale = true;
        }
        // Changes are taken at most every interval (a rollout is thousands of pod events a
        // second); the first whole picture at once.
        let due = built.is_none_or(|b| b.elapsed() >= live.interval);
        let changed = status_rx.has_changed().unwrap_or(false);
        if (changed && (due || !synced)) || built.is_some_and(|b| b.elapsed() >= IDLE_REFRESH) {
            let status = status_rx.borrow_and_update().clone();
            synced = status.synced();
            note = self::note(&status);
            stale = true;
        }
        if let Some(rx) = pass_rx.as_mut()
            && rx.has_changed().unwrap_or(false)
        {
            match rx.borrow_and_update().as_ref() {
                Some(Ok(Some(pass))) => {
                    pass.clone().into_explained(&mut explained);
                    // The NodePool pane shows the budgets from the view.
                    stale = true;
                }
                Some(Ok(None)) => explained.problem = Some("no disruption pass yet".to_owned()),
                Some(Err(e)) => explained.problem = Some(e.clone()),
                None => {}
            }
            redraw = true;
        }
        if let Some(rx) = pass_rx.as_ref()
            && rx.has_changed().is_err()
        {
            pass_rx = None;
        }
        while let Ok(answer) = node_rx.try_recv() {
            explained.node = Some(answer);
            redraw = true;
        }
        if stale {
            let options = Options {
                sort: ui.sort,
                ..live.options.clone()
            };
            let now = chrono::Utc::now();
            view = if synced {
                built = Some(Instant::now());
                watch.read(|listed| karpenter_top::view(listed, prices.as_ref(), &options, now))
            } else {
                karpenter_top::view(&Listed::default(), prices.as_ref(), &options, now)
            };
            karpenter_top::view::explain(&mut view, &explained);
            ui.clamp(view.nodes.len());
            stale = false;
            redraw = true;
        }
        if redraw {
            let screen = Screen {
                view: &view,
                ui: &ui,
                explained: &explained,
                note: &note,
            };
            let frame = terminal
                .draw(|f| f.render_widget(&screen, f.area()))
                .context("drawing")?;
            page_rows = screen.page_rows(frame.area.height);
            redraw = false;
        }
        if !event::poll(TICK).context("reading the terminal")? {
            continue;
        }
        let pressed = match event::read().context("reading the terminal")? {
            Event::Key(k) => key(&k),
            Event::Resize(..) => {
                redraw = true;
                None
            }
            _ => None,
        };
        let Some(pressed) = pressed else { continue };
        redraw = true;
        let sort = ui.sort;
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        match ui.on_key(pressed, &names, page_rows) {
            Action::Quit => return Ok(()),
            Action::Redraw => {}
            Action::Explain(node) => match live.controller.clone() {
                Some(target) => {
                    let tx = node_tx.clone();
                    runtime.spawn(async move {
                        let lines = controller::ask_node(&target, &node).await;
                        let _ = tx.send((node, lines));
                    });
                }
                None => {
                    explained.node = Some((node, vec!["the controller is not asked".to_owned()]))
                }
            },
        }
        stale |= ui.sort != sort;
    }
}
