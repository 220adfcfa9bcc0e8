"""DBBench (AgentBench) on a real MariaDB server: `env.DBBenchEnv` (episodes, ctx, judging),
`backends` (MariaDB and the SQLite fallback), `tasks` (splits and identities), `judge` (SELECT
answers), `server` (start/stop of the project's server via launch/mariadb.sh). Data: `data/`."""
