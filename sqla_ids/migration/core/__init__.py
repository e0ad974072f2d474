"""What the key migration's runners and backends share, below both of them.

The plan's data (:mod:`.model`), the options (:mod:`.options`), the state
table (:mod:`.state`), progress and batch sizing (:mod:`.progress`), the
mapping table (:mod:`.mapping`), filling columns through it (:mod:`.fill`),
small SQL tools (:mod:`.sql`), the names of the objects a migration adds
(:mod:`.names`) and reading SQL text the database keeps (:mod:`.analysis`).
Nothing here imports a backend or a runner: data and tools flow up from it.
"""
