// The Model page: choose a family and one of its presets or custom sizes, open a Hugging Face
// model folder, import an architecture from safetensors, and see the layer table and the model's
// memory at each precision. Every change goes through ProjectDocument::edit() (undoable); the page
// redraws from configChanged(). A bad file or folder is shown on the page (and signalled), never
// written into the project.
#pragma once
#include <QWidget>
#include <cstdint>
#include <string>

class QComboBox;
class QSpinBox;
class QLineEdit;
class QLabel;
class QTableView;
class QPushButton;
class QCustomPlot;

namespace tessera::studio {

class ProjectDocument;
class LayerTableModel;

class ModelPage : public QWidget {
    Q_OBJECT
  public:
    explicit ModelPage(ProjectDocument* doc, QWidget* parent = nullptr);

    // Reads n_layer, d_model, vocab, seq_len (and n_head from metadata) from a safetensors file
    // and sets them with model.init_from as one undoable edit. False + importFailed on a bad file.
    bool importSafetensors(const QString& path);
    LayerTableModel* layerModel() const { return m_layers; }
    QString validationText() const;

  public Q_SLOTS:
    void setDarkTheme(bool dark);
    // Reads a Hugging Face folder (config.json + safetensors) with the engine's reader and sets
    // model.init_from to it (relative when inside the project) as one undoable edit. False +
    // modelFolderFailed, the engine's message shown on the page and the project untouched, when
    // the engine refuses the folder.
    bool openModelFolder(const QString& dir);

  Q_SIGNALS:
    void importFailed(const QString& message);
    void modelFolderFailed(const QString& message);

  private:
    void refresh();  // config -> widgets, table, memory, plot
    void refreshPickers();
    void refreshSummary(int64_t params, double flops_per_token, int64_t activation_bytes);
    void applyPreset(const std::string& preset);
    void editDim(const char* what, int id, int value);
    void chooseSafetensors();
    void chooseModelFolder();
    QString projectRelative(const QString& path) const;
    bool eventFilter(QObject* watched, QEvent* event) override;
    void elideInitFrom();

    ProjectDocument* m_doc;
    LayerTableModel* m_layers;
    QComboBox* m_family;
    QComboBox* m_preset;
    QSpinBox *m_nLayer, *m_nHead, *m_nKvHead, *m_dModel, *m_headDim, *m_ffn, *m_seqLen;
    QComboBox* m_vocab;
    QLineEdit* m_hidden;
    QLabel* m_initFrom;
    QString m_initFromText;  // what m_initFrom shows, before eliding
    QPushButton* m_openFolder;
    QPushButton* m_import;
    QLabel* m_validation;
    QLabel* m_summary;
    QLabel* m_memory[3][2];  // rows: weights, + grads, + AdamW; columns: fp32, bf16
    QTableView* m_table;
    QCustomPlot* m_plot;
    bool m_dark = false;
    QString m_importError;  // the last refused file or folder, until the next model choice
};

}  // namespace tessera::studio
