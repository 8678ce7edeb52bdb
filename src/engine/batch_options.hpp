// batch_options.hpp - how a batch run of `attnmap render` is scheduled and reported (workers, folder walk,
// manifest, resume, shards, the run's figures): filled by the CLI, read by batch, manifest and run_figures.
#pragma once
#include <string>
#include <vector>

namespace attnmap {

/// How a batch run is scheduled and reported (filled by the CLI; no maths here).
struct BatchOptions {
  int jobs = 0;                    ///< images rendered concurrently; 0: the number of usable cores
  std::vector<std::string> ext;    ///< folder walks pick these extensions (case-insensitive, dot optional,
                                   ///< items may be comma lists); empty: default_image_extensions()
  std::string manifest;            ///< JSON-lines file: a header line with the run's settings, then one
                                   ///< object per input; appended to during the run, rewritten with this
                                   ///< run's lines alone at its end; empty: none
  bool skip_existing = false;      ///< images whose outputs all exist already, made with the run's settings
                                   ///< (their provenance records), are skipped (resume)
  int shard_index = 1;             ///< this run renders the inputs whose 0-based sorted index i has
  int shard_count = 1;             ///< i % shard_count == shard_index - 1
  int progress_every = 0;          ///< non-terminal progress: a line per this many images; 0: automatic
  // Figures of the whole run, drawn after its images (engine/run_figures.hpp, docs/figures.md).
  std::string contact_sheet;       ///< FILE.png: every input's overlay in a labelled grid; empty: none
  int sheet_columns = 6;           ///< thumbnails per row of the contact sheet
  bool sheet_columns_given = false;  ///< --sheet-columns was given (refused without --contact-sheet)
  std::string gallery;             ///< DIR: DIR/index.html and DIR/thumbs/; empty: none
};

}  // namespace attnmap
