//! `rackbench man [DIR]`: the man pages, made from the parser.

use anyhow::Context;
use harness::Registry;

use crate::cli::cli_command;

/// `man [DIR]`: rackbench(1) on stdout, or every page into DIR.
pub(crate) fn write_man(reg: &Registry, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        if let Err(e) = clap_mangen::Man::new(cli_command(reg)).render(&mut out)
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(e).context("cannot write the man page");
        }
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(cli_command(reg), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    eprintln!("man pages written to {}", dir.display());
    Ok(())
}
