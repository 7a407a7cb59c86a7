//! `karpenter top` on a terminal: the alternate screen in raw mode, `karpenter_top::Screen`
//! drawn by ratatui, keys read with crossterm. Listing the cluster and asking the controller run
//! as tasks on the runtime and hand their latest answer over a watch channel; this loop owns
//! the terminal, redraws on a new answer, a key or a resize, and restores the terminal on quit,
//! on an error and on a panic (ratatui's hook).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use karpenter_controller::explain::client::Target;
use karpenter_top::{Action, Explained, Key, Listed, Options, Screen, Ui};
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

/// The last list, or why the last list failed (the list before it stays shown).
type Latest = Option<Result<Arc<Listed>, String>>;

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

fn spawn_lister(runtime: &tokio::runtime::Runtime, live: &Live) -> watch::Receiver<Latest> {
    let (tx, rx) = watch::channel(None);
    let (client, interval) = (live.client.clone(), live.interval);
    runtime.spawn(async move {
        loop {
            let listed = karpenter_top::list(&client)
                .await
                .map(Arc::new)
                .map_err(|e| format!("{:#}", anyhow::Error::from(e)));
            if tx.send(Some(listed)).is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    });
    rx
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
    let mut listed_rx = spawn_lister(runtime, &live);
    let mut pass_rx = live
        .controller
        .clone()
        .map(|t| spawn_pass_asker(runtime, t, live.interval));
    let (node_tx, mut node_rx) = mpsc::unbounded_channel::<(String, Vec<String>)>();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _restore = Restore;
    let mut ui = Ui::new(live.options.sort);
    let mut explained = Explained::default();
    let mut listed: Option<Arc<Listed>> = None;
    let mut note = "listing…".to_owned();
    let mut view = karpenter_top::view(
        &Listed::default(),
        prices.as_ref(),
        &live.options,
        chrono::Utc::now(),
    );
    let mut stale = true;
    loop {
        if live.prices.has_changed().unwrap_or(false) {
            prices = live.prices.borrow_and_update().clone();
            stale = true;
        }
        if listed_rx.has_changed().unwrap_or(false) {
            match listed_rx.borrow_and_update().clone() {
                Some(Ok(new)) => {
                    listed = Some(new);
                    note = format!("listed {}", chrono::Utc::now().format("%H:%M:%S UTC"));
                }
                Some(Err(e)) => note = format!("listing failed, showing the last list: {e}"),
                None => {}
            }
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
        }
        if let Some(rx) = pass_rx.as_ref()
            && rx.has_changed().is_err()
        {
            pass_rx = None;
        }
        while let Ok(answer) = node_rx.try_recv() {
            explained.node = Some(answer);
        }
        if stale {
            let options = Options {
                sort: ui.sort,
                ..live.options.clone()
            };
            view = karpenter_top::view(
                listed.as_deref().unwrap_or(&Listed::default()),
                prices.as_ref(),
                &options,
                chrono::Utc::now(),
            );
            karpenter_top::view::explain(&mut view, &explained);
            ui.clamp(view.nodes.len());
            stale = false;
        }
        let screen = Screen {
            view: &view,
            ui: &ui,
            explained: &explained,
            note: &note,
        };
        let frame = terminal
            .draw(|f| f.render_widget(&screen, f.area()))
            .context("drawing")?;
        let page_rows = screen.page_rows(frame.area.height);
        if !event::poll(TICK).context("reading the terminal")? {
            continue;
        }
        let pressed = match event::read().context("reading the terminal")? {
            Event::Key(k) => key(&k),
            _ => None,
        };
        let Some(pressed) = pressed else { continue };
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
