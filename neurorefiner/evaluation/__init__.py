"""Evaluation, the protocol only: method x dataset -> mask -> trace -> score -> per-volume rows; tables,
figures, sweeps and run logs read the rows. One-off measurements live in ``neurorefiner.studies`` so this
package stays what a newcomer reads to know how a number is made."""
